package idlist

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestLists(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want []int
		err  string
	}{
		{nil, nil, ""},
		{[]string{"--tid", "5"}, []int{5}, ""},
		{[]string{"--tid", "5, 7,9"}, []int{5, 7, 9}, ""},
		{[]string{"--tid", "5", "--tid", "6,7"}, []int{5, 6, 7}, ""},
		{[]string{"--tid", "5,5"}, nil, "thread 5 given twice"},
		{[]string{"--tid", "x"}, nil, `bad thread id "x"`},
		{[]string{"--tid", "-4"}, nil, `bad thread id "-4"`},
		{[]string{"--tid", "0"}, nil, `bad thread id "0"`},
		{[]string{"--tid", "4194305"}, nil, `bad thread id "4194305"`},
		{[]string{"--tid", "1,"}, nil, `bad thread id ""`},
		{[]string{"--tid", "0x10"}, nil, `bad thread id "0x10"`},
		{[]string{"--tid", "+5"}, nil, `bad thread id "+5"`},
		{[]string{"--tid", "010"}, []int{10}, ""},
	} {
		var l TIDs
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Var(&l, "tid", "")
		err := fs.Parse(tt.args)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: error %v, want %q", tt.args, err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal(l, tt.want) {
			t.Errorf("%q: %v, %v; want %v", tt.args, l, err, tt.want)
		}
		if s, _ := Parse(l.String()); !slices.Equal(s, tt.want) {
			t.Errorf("%q: String %q does not parse back", tt.args, l.String())
		}
	}
	var p PIDs
	if err := p.Set("3,4"); err != nil || p.String() != "3,4" {
		t.Errorf("PIDs: %v %v", p, err)
	}
	if err := p.Set("4"); err == nil || !strings.Contains(err.Error(), "process 4 given twice") {
		t.Errorf("PIDs twice: %v", err)
	}
}

// A single PID (dump's -p) is decimal: "010" is 10, not octal 8, and a
// base prefix or a sign is refused (they dumped, or froze, another
// process than the one meant).
func TestPID(t *testing.T) {
	for s, want := range map[string]int{"8": 8, "010": 10, "4194304": MaxID, "99999999": 99999999} {
		var p PID
		if err := p.Set(s); err != nil || int(p) != want {
			t.Errorf("PID %q: %d, %v; want %d", s, p, err, want)
		}
	}
	for _, s := range []string{"0x10", "0o10", "+8", "-8", " 8", "8 ", "0", "", "9999999999", "1e3", "1_0"} {
		var p PID
		if err := p.Set(s); err == nil {
			t.Errorf("PID %q accepted as %d", s, p)
		}
	}
}

func TestCheckThreads(t *testing.T) {
	if err := CheckThreads(10, []int{10, 11}, []int{10, 11, 12}); err != nil {
		t.Error(err)
	}
	err := CheckThreads(10, []int{10, 99, 98}, []int{10, 11})
	if err == nil || !strings.Contains(err.Error(), "--tid 99,98 are not threads of process 10") {
		t.Errorf("got %v", err)
	}
}
