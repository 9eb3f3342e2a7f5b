package unwind

import (
	"math/rand"
	"testing"
	"time"
)

// TestWalkRandomStacks runs FuzzWalk's invariants over seeded random
// stacks full of plausible return addresses and stack pointers, so they are
// checked on every go test, not only under -fuzz. Each walk must also be
// quick: the guards bound it, whatever the bytes.
func TestWalkRandomStacks(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for n := 0; n < 3000; n++ {
		stack := make([]byte, rng.Intn(0x1200))
		rng.Read(stack)
		for i := 0; i+8 <= len(stack); i += 8 {
			if rng.Intn(2) == 0 {
				v := []uint64{rt(startFn), a64Start, s390Start, stackLow}[rng.Intn(4)] + uint64(rng.Intn(0x1000))
				for j := 0; j < 8; j++ {
					stack[i+j] = byte(v >> (8 * j))
				}
			}
		}
		rowSel := make([]byte, rng.Intn(10))
		rng.Read(rowSel)
		t0 := time.Now()
		fuzzWalkBody(t, stack, uint8(rng.Intn(256)), []uint64{rt(startFn), a64Start, s390Start}[rng.Intn(3)]+uint64(rng.Intn(0x400)), uint64(rng.Intn(0x1100)), uint64(rng.Intn(0x1100)), []uint64{0, pacMask, rng.Uint64()}[rng.Intn(3)], rowSel)
		if d := time.Since(t0); d > time.Second {
			t.Fatalf("slow input %d: %v", n, d)
		}
	}
}
