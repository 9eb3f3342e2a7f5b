package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
)

func init() {
	register(command{name: "version", brief: "print the version and VCS revision stacktop was built from", run: runVersion})
}

func runVersion(args []string) int {
	if len(args) > 0 {
		fmt.Fprintln(os.Stderr, "usage: stacktop version (or stacktop --version)")
		return exitUsage
	}
	fmt.Println(versionString())
	return 0
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
