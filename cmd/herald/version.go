package main

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// versionCmd is `herald version`, the same as `herald --version`.
type versionCmd struct{}

func (versionCmd) Run(e runEnv) error {
	fmt.Fprintln(e.stdout, version())
	return nil
}

// version describes this build from what the Go toolchain recorded in it.
func version() string {
	info, ok := debug.ReadBuildInfo()
	return describeBuild(info, ok)
}

// describeBuild is "herald VERSION", then the commit and whether the tree had uncommitted changes when
// the toolchain recorded them, then the Go version. A build from a checkout has the version "(devel)"
// (Go 1.24 and later derive a pseudo-version from the commit instead); -trimpath keeps both. A build with
// -buildvcs=false, from a git worktree (whose .git is a file, which Go does not recognise) or outside a
// checkout records no commit, and then none is shown.
func describeBuild(info *debug.BuildInfo, ok bool) string {
	if !ok || info == nil {
		return "herald (unknown version: no build information)"
	}
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	parts := []string{"herald " + v}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		commit := "commit " + rev
		if settings["vcs.modified"] == "true" {
			commit += " (modified)"
		}
		if t := settings["vcs.time"]; t != "" {
			commit += " of " + t
		}
		parts = append(parts, commit)
	}
	if info.GoVersion != "" {
		parts = append(parts, info.GoVersion)
	}
	return strings.Join(parts, ", ")
}
