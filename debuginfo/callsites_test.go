package debuginfo

import (
	"cmp"
	"debug/dwarf"
	"debug/elf"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// buildTailcall compiles the tail-call target -O2 with the given -g flags.
func buildTailcall(t testing.TB, flags ...string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed")
	}
	bin := filepath.Join(t.TempDir(), "tailcall")
	args := append([]string{"-O2", "-pthread", "-o", bin, "../testdata/targets/tailcall.c", "../testdata/targets/tailcall_lib.c"}, flags...)
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %v: %v\n%s", args, err, out)
	}
	return bin
}

func funcSyms(t *testing.T, f *elf.File) map[string]elf.Symbol {
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]elf.Symbol{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 {
			m[s.Name] = s
		}
	}
	return m
}

// GCC's call sites, DWARF 5 (DW_TAG_call_site) and DWARF 4 with GNU
// extensions (DW_TAG_GNU_call_site): spin_caller calls jump2, which jumps
// to jump1, which jumps to spin_here; the chain from the call to spin_here
// is jump1 then jump2 (innermost first), each frame's PC right after its
// jump. The wrapper's jump to pause, declared only, is named.
func TestCallSitesGCC(t *testing.T) {
	t.Parallel()
	for _, g := range []string{"-gdwarf-5", "-gdwarf-4"} {
		t.Run(g, func(t *testing.T) {
			f, err := elf.Open(buildTailcall(t, g))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cs, err := NewCallSites(f)
			if err != nil {
				t.Fatal(err)
			}
			sym := funcSyms(t, f)
			within := func(pc uint64, name string) bool {
				s := sym[name]
				return pc > s.Value && pc <= s.Value+s.Size
			}
			var call CallSite
			found := false
			for _, s := range cs.byReturn {
				if s.Func == sym["spin_caller"].Value && !s.TailCall {
					call, found = s, true
				}
			}
			if !found || call.Target != sym["jump2"].Value {
				t.Fatalf("spin_caller's call site: %+v (found %v), want a call of jump2 at %#x", call, found, sym["jump2"].Value)
			}
			isSpin := func(entry uint64, name string) bool { return entry == sym["spin_here"].Value }
			chain := cs.TailChain(call, nil, isSpin)
			if len(chain) != 2 || chain[0].Func != sym["jump1"].Value || chain[1].Func != sym["jump2"].Value ||
				!within(chain[0].ReturnPC, "jump1") || !within(chain[1].ReturnPC, "jump2") {
				t.Errorf("chain %+v, want jump1 then jump2", chain)
			}
			// Called directly: nothing between.
			isJump2 := func(entry uint64, name string) bool { return entry == sym["jump2"].Value }
			if c := cs.TailChain(call, nil, isJump2); len(c) != 0 {
				t.Errorf("direct call gave chain %+v", c)
			}
			tails := cs.TailCalls(sym["wait_pause"].Value)
			if len(tails) != 1 || tails[0].TargetName != "pause" || !within(tails[0].ReturnPC, "wait_pause") {
				t.Errorf("wait_pause's tail calls %+v, want one jump to pause", tails)
			}
		})
	}
}

// TailChain keeps only an unambiguous chain, and stops on cycles.
func TestTailChainAmbiguity(t *testing.T) {
	t.Parallel()
	cs := &CallSites{byReturn: map[uint64]CallSite{}, tails: map[uint64][]CallSite{}}
	// A jumps to B or C; both jump to D. A call of A that ends in D is
	// ambiguous. E jumps to F, F to E (a cycle), E to D.
	cs.add(CallSite{ReturnPC: 0x105, Func: 0x100, TailCall: true, Target: 0x200})
	cs.add(CallSite{ReturnPC: 0x10a, Func: 0x100, TailCall: true, Target: 0x300})
	cs.add(CallSite{ReturnPC: 0x205, Func: 0x200, TailCall: true, Target: 0x400})
	cs.add(CallSite{ReturnPC: 0x305, Func: 0x300, TailCall: true, Target: 0x400})
	cs.add(CallSite{ReturnPC: 0x505, Func: 0x500, TailCall: true, Target: 0x600})
	cs.add(CallSite{ReturnPC: 0x605, Func: 0x600, TailCall: true, Target: 0x500})
	cs.add(CallSite{ReturnPC: 0x50a, Func: 0x500, TailCall: true, TargetName: "d"})
	isD := func(entry uint64, name string) bool { return entry == 0x400 || name == "d" }
	if c := cs.TailChain(CallSite{Target: 0x100}, nil, isD); c != nil {
		t.Errorf("ambiguous chain kept: %+v", c)
	}
	if c := cs.TailChain(CallSite{Target: 0x200}, nil, isD); len(c) != 1 || c[0].ReturnPC != 0x205 {
		t.Errorf("B -> D: %+v", c)
	}
	c := cs.TailChain(CallSite{Target: 0x500}, nil, isD)
	if !slices.Equal(c, []TailCallFrame{{Func: 0x500, ReturnPC: 0x50a}}) {
		t.Errorf("E -> D through a cycle: %+v", c)
	}
	// A name resolved to an entry is followed.
	resolve := func(name string) uint64 {
		if name == "b" {
			return 0x200
		}
		return 0
	}
	if c := cs.TailChain(CallSite{TargetName: "b"}, resolve, isD); len(c) != 1 || c[0].Func != 0x200 {
		t.Errorf("named b -> D: %+v", c)
	}
}

func FuzzCallSites(f *testing.F) {
	ef, err := elf.Open(buildTailcall(f, "-g"))
	if err != nil {
		f.Fatal(err)
	}
	data := func(name string) []byte {
		s := ef.Section(name)
		if s == nil {
			return nil
		}
		b, _ := s.Data()
		return b
	}
	info, abbrev, str := data(".debug_info"), data(".debug_abbrev"), data(".debug_str")
	ef.Close()
	f.Add(info, abbrev)
	f.Fuzz(func(t *testing.T, info, abbrev []byte) {
		d, err := dwarf.New(abbrev, nil, nil, info, nil, nil, nil, str)
		if err != nil {
			return
		}
		cs, err := NewCallSitesFromDWARF(d)
		if cs == nil {
			t.Fatalf("nil CallSites (err %v)", err)
		}
		for _, s := range cs.byReturn {
			cs.TailChain(s, nil, func(uint64, string) bool { return false })
		}
	})
}

// compareLazyCallSites checks that the call sites read unit by unit from a
// lazy line index answer as those read from the whole DWARF: At for every
// return address (sampled down to limit), TailCalls for every function
// making tail calls, and TailChain from calls into such functions. The
// first lookup must read only the units holding its address.
func compareLazyCallSites(t *testing.T, f *elf.File, limit int) {
	t.Helper()
	d, err := loadDWARF(f)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := NewCallSitesFromDWARF(d)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLines(f)
	if err != nil {
		t.Fatal(err)
	}
	if l.lazy == nil {
		t.Fatal("NewLines did not index from .debug_aranges")
	}
	lazy, err := NewCallSitesFromLines(l)
	if err != nil {
		t.Fatal(err)
	}
	if lazy.lazy == nil || lazy.Decoded() != 0 {
		t.Fatalf("call sites of a lazy line index: lazy %v, %d units read before any lookup", lazy.lazy != nil, lazy.Decoded())
	}
	returns := slices.Sorted(maps.Keys(whole.byReturn))
	if len(returns) == 0 {
		t.Fatal("no call sites: the comparison proves nothing")
	}
	// The first lookup reads the units whose ranges hold the call.
	first := returns[len(returns)/2]
	if s, ok := lazy.At(first); !ok || s != whole.byReturn[first] {
		t.Errorf("At(%#x) = %+v, %v; want %+v", first, s, ok, whole.byReturn[first])
	}
	holding := 0
	for _, u := range l.units {
		if first-1 >= u.lo && first-1 < u.hi {
			holding++
		}
	}
	if n := lazy.Decoded(); n < 1 || n > int64(holding) {
		t.Errorf("one lookup read %d units; %d hold the address", n, holding)
	}
	t.Logf("%d call sites in %d unit ranges; the first lookup read %d units", len(returns), l.Units(), lazy.Decoded())

	step := max(1, len(returns)/limit)
	for i := 0; i < len(returns); i += step {
		pc := returns[i]
		for _, q := range []uint64{pc, pc + 1} {
			a, okA := lazy.At(q)
			b, okB := whole.At(q)
			if a != b || okA != okB {
				t.Fatalf("At(%#x): lazy %+v %v, whole %+v %v", q, a, okA, b, okB)
			}
		}
	}
	byReturn := func(a, b CallSite) int { return cmp.Compare(a.ReturnPC, b.ReturnPC) }
	funcs := slices.Sorted(maps.Keys(whole.tails))
	step = max(1, len(funcs)/limit)
	for i := 0; i < len(funcs); i += step {
		a := slices.SortedFunc(slices.Values(lazy.TailCalls(funcs[i])), byReturn)
		b := slices.SortedFunc(slices.Values(whole.TailCalls(funcs[i])), byReturn)
		if !slices.Equal(a, b) {
			t.Fatalf("TailCalls(%#x):\n lazy  %+v\n whole %+v", funcs[i], a, b)
		}
	}
	// Chains: from each call of a function that makes tail calls, to each
	// function two jumps or fewer from it.
	names := map[string]uint64{}
	syms, _ := f.Symbols()
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 {
			names[s.Name] = s.Value
		}
	}
	resolve := func(name string) uint64 { return names[name] }
	target := func(s CallSite) uint64 {
		if s.Target == 0 {
			return resolve(s.TargetName)
		}
		return s.Target
	}
	chains, compared := 0, 0
	for _, pc := range returns {
		site := whole.byReturn[pc]
		callees := map[uint64]bool{}
		for _, t1 := range whole.tails[target(site)] {
			callees[target(t1)] = true
			for _, t2 := range whole.tails[target(t1)] {
				callees[target(t2)] = true
			}
		}
		delete(callees, 0)
		for callee := range callees {
			isCallee := func(entry uint64, name string) bool {
				if entry == 0 {
					entry = resolve(name)
				}
				return entry == callee
			}
			a := lazy.TailChain(site, resolve, isCallee)
			b := whole.TailChain(site, resolve, isCallee)
			if !slices.Equal(a, b) {
				t.Fatalf("TailChain from the call returning to %#x to %#x:\n lazy  %+v\n whole %+v", pc, callee, a, b)
			}
			if compared++; len(b) > 0 {
				chains++
			}
		}
		if compared >= limit {
			break
		}
	}
	if chains == 0 {
		t.Errorf("%d chains compared, none found: the comparison proves little", compared)
	}
	t.Logf("%d chains compared, %d non-empty; %d units read in all", compared, chains, lazy.Decoded())
}

// TestLazyCallSitesTailcall compares lazy and whole call sites of the
// tail-call fixture, DWARF 5 and DWARF 4 (GNU call sites).
func TestLazyCallSitesTailcall(t *testing.T) {
	t.Parallel()
	for _, g := range []string{"-gdwarf-5", "-gdwarf-4"} {
		t.Run(g, func(t *testing.T) {
			f, err := elf.Open(buildTailcall(t, g))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			compareLazyCallSites(t, f, 1000)
		})
	}
}

// TestLazyCallSitesLibc does the same on libc's debug file, where the
// first lookup must read a few of its 2,000 units.
func TestLazyCallSitesLibc(t *testing.T) {
	t.Parallel()
	_, df, _ := openLibcDebug(t)
	compareLazyCallSites(t, df.File, 2000)
}

// TestCallSitesNoWait: the NoWait lookups start the unit in the background
// and then give the waiting lookups' answers.
func TestCallSitesNoWait(t *testing.T) {
	t.Parallel()
	f, err := elf.Open(buildTailcall(t, "-g"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := NewLines(f)
	if err != nil {
		t.Fatal(err)
	}
	lazy, err := NewCallSitesFromLines(l)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := NewCallSites(f)
	if err != nil {
		t.Fatal(err)
	}
	sym := funcSyms(t, f)
	var call CallSite
	for _, s := range whole.byReturn {
		if s.Func == sym["spin_caller"].Value && !s.TailCall {
			call = s
		}
	}
	isSpin := func(entry uint64, name string) bool { return entry == sym["spin_here"].Value }
	if _, _, ready := lazy.AtNoWait(call.ReturnPC); ready {
		t.Fatal("AtNoWait ready before any unit was read")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, ok, ready := lazy.AtNoWait(call.ReturnPC)
		if ready {
			if !ok || s != call {
				t.Fatalf("AtNoWait: %+v %v, want %+v", s, ok, call)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("AtNoWait never ready")
		}
		time.Sleep(time.Millisecond)
	}
	chain, ready := lazy.TailChainNoWait(call, nil, isSpin)
	if want := whole.TailChain(call, nil, isSpin); !ready || len(want) != 2 || !slices.Equal(chain, want) {
		t.Errorf("TailChainNoWait: %+v ready %v, want %+v", chain, ready, want)
	}
	if lazy.Decoded() != 1 {
		t.Errorf("%d units read, want the fixture's one", lazy.Decoded())
	}
}
