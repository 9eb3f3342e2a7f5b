package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

func init() {
	register(newVersionCommand)
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print the version and VCS revision stacktop was built from",
		Long: `Version prints the module version and the VCS revision stacktop was
built from, the Go version and the platform, as stacktop --version does.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				fmt.Fprintln(os.Stderr, "usage: stacktop version (or stacktop --version)")
				return exitStatus(exitUsage)
			}
			fmt.Println(versionString())
			return nil
		},
	}
}

// versionString is the module version and the VCS revision from the build
// information the Go toolchain embeds: "stacktop VERSION (revision REV,
// COMMIT-TIME[, modified]) GOVERSION OS/ARCH". A build made with
// -buildvcs=false (or outside a repository) says it has no revision.
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "stacktop: no build information (not built with module support)"
	}
	version := bi.Main.Version
	if version == "" {
		version = "(devel)"
	}
	set := map[string]string{}
	for _, s := range bi.Settings {
		set[s.Key] = s.Value
	}
	var vcs []string
	if rev := set["vcs.revision"]; rev != "" {
		vcs = append(vcs, "revision "+rev)
		if t := set["vcs.time"]; t != "" {
			vcs = append(vcs, t)
		}
		if set["vcs.modified"] == "true" {
			vcs = append(vcs, "modified")
		}
	} else {
		vcs = append(vcs, "no VCS revision: built outside a repository or with -buildvcs=false")
	}
	return fmt.Sprintf("stacktop %s (%s) %s %s/%s", version, strings.Join(vcs, ", "), bi.GoVersion, runtime.GOOS, runtime.GOARCH)
}
