//go:build linux

package ptrace

import "testing"

func TestRunDelay(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"123456 7890 12\n", 7890, true},
		{"1 18446744073709551615 3\n", 18446744073709551615, true},
		{"123456\n", 0, false},
		{"1 x 2\n", 0, false},
		{"", 0, false},
	} {
		got, ok := runDelay([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("runDelay(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzRunDelay: the schedstat line is parsed without trusting its shape.
func FuzzRunDelay(f *testing.F) {
	f.Add([]byte("123456 7890 12\n"))
	f.Add([]byte("1 -2 3\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if n, ok := runDelay(b); !ok && n != 0 {
			t.Fatalf("failed parse returned %d", n)
		}
	})
}
