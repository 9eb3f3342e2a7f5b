package targets

import "math"

// SplitHotShare is the percentage of the split target's CPU time in
// main -> a -> hot, by construction (testdata/targets/split.c); the rest
// is in main -> b -> cold.
const SplitHotShare = 75.0

// SplitMinSamples is the fewest samples of split's two chains a share is
// judged on at all (SplitTolerance is then 13.8 points), and
// SplitGoodSamples what a test that can record longer should aim for (at
// most 8 points).
const (
	SplitMinSamples  = 200
	SplitGoodSamples = 700
)

// SplitTolerance is how far, in percentage points, the hot share of n
// samples of split may be from SplitHotShare: 4.5 standard deviations of
// a share of n samples (a false failure once in 150,000 runs), and at
// least 3 points. A fixed 5-point margin failed on loaded machines, where
// the target gets less CPU and the same recording fewer samples.
func SplitTolerance(n int64) float64 {
	p := SplitHotShare / 100
	return max(3, 4.5*100*math.Sqrt(p*(1-p)/float64(n)))
}
