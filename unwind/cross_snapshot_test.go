package unwind_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"codeberg.org/stacktop/stacktop/backchain"
	"codeberg.org/stacktop/stacktop/regs"
	"codeberg.org/stacktop/stacktop/unwind"
)

// The snapshots under testdata/cross/snapshots were captured live on s390x
// and arm64 kernels under full-system emulation by emu/capture (emu/run.sh
// with CAPTURE=1), from the fixtures testdata/cross/build.sh cross-builds:
// threads spinning in call chains known by construction. Each comes with a
// symbols sidecar naming the functions of the recorded frames, so the
// replay checks names without the binaries. They replay here on whatever
// host runs the tests: the walk's architecture comes from the snapshot.

const crossDir = "../testdata/cross/snapshots"

// crossSidecar mirrors emu/capture's Sidecar.
type crossSidecar struct {
	Fixture string   `json:"fixture"`
	Thread  string   `json:"thread"`
	Chain   []string `json:"chain"`
	Method  string   `json:"method"`
	Frames  []struct {
		PC    uint64 `json:"pc"`
		Name  string `json:"name"`
		Start uint64 `json:"start"`
		Size  uint64 `json:"size"`
	} `json:"frames"`
}

// crossOptions is the walk emu/capture ran: SFrame, then frame pointers
// (arm64) or the back chain (s390x).
func crossOptions(snap *unwind.Snapshot, mods unwind.ModuleList) unwind.Options {
	var o unwind.Options
	if snap.Regs.Arch == regs.S390X {
		o.Fallback = backchain.Unwinder{
			InVDSO: func(pc uint64) bool { m, ok := mods.ModuleAt(pc); return ok && m.IsVDSO },
			IsCode: func(pc uint64) bool { _, ok := mods.ModuleAt(pc); return ok },
		}
	}
	return o
}

func readCross(t *testing.T, name string) (*unwind.Snapshot, unwind.ModuleList, *crossSidecar) {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	snap, err := unwind.ReadSnapshot(f)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Expect == nil {
		t.Fatal("snapshot has no expected result")
	}
	mods, err := snap.ModuleList()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(strings.TrimSuffix(name, ".snapshot.json") + ".symbols.json")
	if err != nil {
		t.Fatal(err)
	}
	var side crossSidecar
	if err := json.Unmarshal(b, &side); err != nil {
		t.Fatal(err)
	}
	return snap, mods, &side
}

func TestCrossSnapshots(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(crossDir, "*.snapshot.json"))
	arches := map[regs.Arch]bool{}
	for _, name := range files {
		t.Run(filepath.Base(name), func(t *testing.T) {
			snap, mods, side := readCross(t, name)
			arches[snap.Regs.Arch] = true
			st, err := snap.Walk(crossOptions(snap, mods))
			if err != nil {
				t.Fatal(err)
			}
			if err := snap.Check(st); err != nil {
				t.Fatalf("replay differs from the live walk: %v", err)
			}
			// The known chain, innermost first, found by the fixture's method.
			if len(st.Frames) < len(side.Chain) {
				t.Fatalf("%d frames, want the chain %v", len(st.Frames), side.Chain)
			}
			for i, want := range side.Chain {
				f := st.Frames[i]
				pc := f.PC
				if i > 0 {
					pc--
				}
				if got := crossName(side, pc); got != want {
					t.Errorf("frame %d (%#x) is %q, want %q", i, f.PC, got, want)
				}
				if i > 0 && f.Method.String() != side.Method {
					t.Errorf("frame %d (%s) found by %v, want %s", i, want, f.Method, side.Method)
				}
			}
		})
	}
	for _, a := range []regs.Arch{regs.S390X, regs.ARM64} {
		if !arches[a] {
			t.Errorf("no %v snapshot in %s", a, crossDir)
		}
	}
}

// crossName names pc from the sidecar's symbols.
func crossName(side *crossSidecar, pc uint64) string {
	for _, f := range side.Frames {
		if pc >= f.Start && pc < f.Start+f.Size {
			return f.Name
		}
	}
	return ""
}

// The replay must be able to fail: without the method the fixture needs,
// without the PAC mask of a pointer-authenticating arm64 machine, or with
// the stack bytes gone, the recorded walk is not reproduced.
func TestCrossSnapshotsCanFail(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(crossDir, "*.snapshot.json"))
	for _, name := range files {
		t.Run(filepath.Base(name), func(t *testing.T) {
			snap, mods, side := readCross(t, name)
			opts := crossOptions(snap, mods)
			if side.Method != "sframe" {
				// Frame pointers or the back chain are the only way here.
				st, err := snap.Walk(unwind.Options{NoFramePointer: true})
				if err != nil {
					t.Fatal(err)
				}
				if snap.Check(st) == nil {
					t.Errorf("walk without %s reproduced the stack", side.Method)
				}
			}
			if snap.PACMask != 0 {
				// The saved return addresses carry pointer-authentication
				// codes: without the mask they point nowhere.
				mask := snap.PACMask
				snap.PACMask = 0
				st, err := snap.Walk(opts)
				if err != nil {
					t.Fatal(err)
				}
				if snap.Check(st) == nil {
					t.Error("walk without the PAC mask reproduced the stack")
				}
				snap.PACMask = mask
			}
			saved := snap.Window.Bytes
			snap.Window.Bytes = make([]byte, len(saved))
			st, err := snap.Walk(opts)
			if err != nil {
				t.Fatal(err)
			}
			if snap.Check(st) == nil {
				t.Error("walk over a zeroed stack reproduced the stack")
			}
			snap.Window.Bytes = saved
		})
	}
}
