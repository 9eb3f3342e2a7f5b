package main

import (
	"strings"

	"github.com/spf13/pflag"

	"codeberg.org/stacktop/stacktop/unwind"
)

// unwinderFlags are --unwinder and its shorthand --no-cfi, shared by dump,
// record and top.
type unwinderFlags struct {
	list  unwinderListValue
	noCFI bool
}

const unwinderUsage = "ordered unwinders to use, a subset of sframe,cfi,fp (s390x: sframe,cfi,backchain) (default all, in that order)"

func (u *unwinderFlags) addTo(fs *pflag.FlagSet) {
	fs.Var(&u.list, "unwinder", unwinderUsage)
	fs.BoolVar(&u.noCFI, "no-cfi", false, "shorthand for --unwinder without cfi (shows what SFrame and frame pointers cover)")
	setGroup(fs, groupStacks, "unwinder", "no-cfi")
}

// methods is --unwinder's list; nil means the architecture's default.
// --no-cfi is applied by the resolver (resolve.Options.NoCFI), which knows
// the architecture.
func (u *unwinderFlags) methods() []unwind.Method { return u.list.methods }

// unwinderListValue is --unwinder: a comma-separated list of
// unwind.UnwinderNames, parsed (and refused) as it is given.
type unwinderListValue struct {
	text    string
	methods []unwind.Method
}

func (v *unwinderListValue) String() string { return v.text }

func (v *unwinderListValue) Type() string { return "unwinders" }

func (v *unwinderListValue) Set(s string) error {
	m, err := unwind.ParseUnwinders(s)
	if err != nil {
		return err
	}
	v.text, v.methods = strings.TrimSpace(s), m
	return nil
}
