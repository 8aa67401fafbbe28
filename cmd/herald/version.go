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

// buildVersion is stamped by `make build` and the Dockerfile (-ldflags "-X main.buildVersion=…", from
// `git describe`): a build from a checkout otherwise says "(devel)", which tells an operator nothing.
var buildVersion string

// version describes this build from what the Go toolchain recorded in it and the stamped version.
func version() string {
	info, ok := debug.ReadBuildInfo()
	return describeBuild(info, ok, buildVersion)
}

// describeBuild is "herald VERSION", then the commit and whether the tree had uncommitted changes when
// the toolchain recorded them, then the Go version. A build from a checkout has the version "(devel)"
// (Go 1.24 and later derive a pseudo-version from the commit instead); -trimpath keeps both. A build with
// -buildvcs=false, from a git worktree (whose .git is a file, which Go does not recognise) or outside a
// checkout records no commit, and then none is shown. A stamped version wins over "(devel)" and a
// pseudo-version, not over a module version a `go install …@v1.2.0` recorded.
func describeBuild(info *debug.BuildInfo, ok bool, stamped string) string {
	if !ok || info == nil {
		if stamped != "" {
			return "herald " + stamped
		}
		return "herald (unknown version: no build information)"
	}
	v := info.Main.Version
	if stamped != "" && (v == "" || v == "(devel)" || strings.Count(v, "-") >= 2) {
		v = stamped
	}
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
