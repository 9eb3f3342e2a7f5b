package resolve

import (
	"codeberg.org/stacktop/stacktop/unwind"
)

// Unwinders is the ordered list of unwinding methods the target's walks
// may use: Options.Unwinders, or the architecture's default, without CFI
// under Options.NoCFI. The summaries and dump's JSON show it.
func (r *Resolver) Unwinders() []unwind.Method {
	list := r.opts.Unwinders
	if list == nil {
		list = unwind.DefaultUnwinders(r.Arch)
	}
	if r.opts.NoCFI {
		list = unwind.WithoutMethod(list, unwind.MethodCFI)
	}
	return list
}

// checkUnwinders refuses an unwinder the target's architecture does not
// have (fp on s390x, backchain elsewhere).
func (r *Resolver) checkUnwinders() error {
	if r.opts.Unwinders == nil {
		return nil
	}
	return unwind.CheckUnwinders(r.Arch, r.opts.Unwinders)
}

// funcAt is unwind.Options.FuncAt: the runtime [start, end) of the
// symbol holding pc. The frame-0 link-register rules (arm64 without
// tables, the s390x back chain) use it to tell a leaf's caller from a
// return address into the function itself; it loads the module's symbol
// table on first use, as naming the frame would.
func (r *Resolver) funcAt(pc uint64) (start, end uint64, ok bool) {
	em, found := r.space.Find(pc)
	if !found || em.Module == nil || pc < em.Bias {
		return 0, 0, false
	}
	ms := r.syms.module(r, em.Module)
	if ms.table == nil {
		return 0, 0, false
	}
	sym, found := ms.table.Lookup(pc - em.Bias)
	if !found || sym.Size == 0 {
		return 0, 0, false
	}
	return sym.Start + em.Bias, sym.End() + em.Bias, true
}

// UnwinderNames is Unwinders as names, for summaries and JSON.
func (r *Resolver) UnwinderNames() []string {
	list := r.Unwinders()
	out := make([]string, len(list))
	for i, m := range list {
		out[i] = m.String()
	}
	return out
}
