package main

import (
	"flag"
	"fmt"

	"codeberg.org/stacktop/stacktop/unwind"
)

// unwinderFlags are --unwinder and its shorthand --no-cfi, shared by dump,
// record and top.
type unwinderFlags struct {
	list  string
	noCFI bool
}

const unwinderUsage = "ordered unwinders to use, a subset of sframe,cfi,fp (s390x: sframe,cfi,backchain) (default all, in that order)"

func (u *unwinderFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&u.list, "unwinder", "", unwinderUsage)
	fs.BoolVar(&u.noCFI, "no-cfi", false, "shorthand for --unwinder without cfi (shows what SFrame and frame pointers cover)")
}

// methods parses --unwinder; nil means the architecture's default. --no-cfi
// is applied by the resolver (resolve.Options.NoCFI), which knows the
// architecture.
func (u *unwinderFlags) methods() ([]unwind.Method, error) {
	if u.list == "" {
		return nil, nil
	}
	m, err := unwind.ParseUnwinders(u.list)
	if err != nil {
		return nil, fmt.Errorf("--unwinder: %w", err)
	}
	return m, nil
}
