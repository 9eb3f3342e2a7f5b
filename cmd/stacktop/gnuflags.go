package main

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// gnuLongFlags spells the single-dash long flags of stacktop's first
// command line (Go's flag package: -rate 99, -no-lines, -version) the GNU
// way (--rate 99), so scripts written for it keep working. pflag would
// read -rate as the shorthands -r ate, a rate of "ate".
//
// An argument is rewritten only where pflag would read a flag, and only if
// it is exactly -NAME or -NAME=VALUE for a long flag NAME of the command;
// the values of flags, arguments after --, and a command to start (record
// and top: everything from its first argument on) are left alone.
func gnuLongFlags(root *cobra.Command, args []string) []string {
	cmd, rest := root, args
	if len(args) > 0 {
		if sub, _, err := root.Find(args[:1]); err == nil && sub != root {
			cmd, rest = sub, args[1:]
		}
	}
	cmd.InitDefaultHelpFlag()
	fs := cmd.Flags()
	out := slices.Clone(args)
	at := len(args) - len(rest) // index in out of rest[0]
	for i := 0; i < len(rest); i++ {
		arg := rest[i]
		switch {
		case arg == "--":
			return out
		case strings.HasPrefix(arg, "--"):
			name, _, hasValue := strings.Cut(arg[2:], "=")
			if f := fs.Lookup(name); f != nil && !hasValue && takesValue(f) {
				i++ // its value, whatever it looks like
			}
		case len(arg) > 2 && arg[0] == '-':
			name, _, hasValue := strings.Cut(arg[1:], "=")
			if f := fs.Lookup(name); f != nil {
				out[at+i] = "-" + arg
				if !hasValue && takesValue(f) {
					i++
				}
				continue
			}
			// Shorthands, perhaps several (-qp 1234) and a value
			// glued to the last (-p1234): the next argument is a
			// value only if the last letter wants one.
			for j := 1; j < len(arg); j++ {
				f := fs.ShorthandLookup(arg[j : j+1])
				if f == nil || takesValue(f) {
					if f != nil && j == len(arg)-1 {
						i++
					}
					break
				}
			}
		case len(arg) == 2 && arg[0] == '-':
			if f := fs.ShorthandLookup(arg[1:]); f != nil && takesValue(f) {
				i++
			}
		default: // an argument
			if cmd.Annotations[annotationTakesCommand] != "" {
				return out // the command to start and its own arguments
			}
		}
	}
	return out
}

// takesValue tells a flag that reads the next argument as its value when
// none is glued to it (--rate 99), unlike a bool (--idle).
func takesValue(f *pflag.Flag) bool { return f.NoOptDefVal == "" }
