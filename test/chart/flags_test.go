package chart

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

var (
	// Kong's help: a flag per line ("  -h, --help", "      --http-addr=\":8080\""), its variables at the end
	// of its help text ("($HERALD_HTTP_ADDR)").
	flagLine = regexp.MustCompile(`(?m)^\s+(?:-[A-Za-z0-9], )?--([A-Za-z0-9][A-Za-z0-9._-]*)`)
	envNote  = regexp.MustCompile(`\(\$(HERALD_[A-Z0-9_]+)\)`)
)

// subcommandHelp is what `herald <subcommand> -h` says a subcommand accepts.
type subcommandHelp struct {
	flags map[string]bool
	envs  map[string]bool
	text  string
}

var (
	buildOnce sync.Once
	heraldBin string
	buildErr  error
	buildOut  []byte
)

// heraldBinary builds ./cmd/herald once per test binary (or takes $HERALD_BINARY, a binary built from this
// tree, to save the build).
func heraldBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("HERALD_BINARY"); b != "" {
		return b
	}
	buildOnce.Do(func() {
		heraldBin = filepath.Join(scratchDir, "herald")
		cmd := exec.Command("go", "build", "-o", heraldBin, "./cmd/herald")
		cmd.Dir = repoRoot(t)
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("building herald: %v\n%s", buildErr, buildOut)
	}
	return heraldBin
}

// helpOf runs `herald <subcommand> -h`; an error means the binary has no such subcommand.
func helpOf(bin, subcommand string) (subcommandHelp, error) {
	var out bytes.Buffer
	cmd := exec.Command(bin, subcommand, "-h")
	cmd.Stdout, cmd.Stderr = &out, &out
	// Help must not depend on configuration the test machine happens to have.
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	if err := cmd.Run(); err != nil {
		return subcommandHelp{}, fmt.Errorf("herald %s -h: %v\n%s", subcommand, err, out.String())
	}
	h := subcommandHelp{flags: map[string]bool{}, envs: map[string]bool{}, text: out.String()}
	for _, m := range flagLine.FindAllStringSubmatch(h.text, -1) {
		h.flags[m[1]] = true
	}
	for _, m := range envNote.FindAllStringSubmatch(h.text, -1) {
		h.envs[m[1]] = true
	}
	if len(h.flags) == 0 {
		return h, fmt.Errorf("herald %s -h lists no flags:\n%s", subcommand, h.text)
	}
	return h, nil
}

// TestChartPassesOnlyFlagsAndVariablesTheBinaryAccepts builds herald and checks, for every container the
// chart renders in every value set, that its subcommand exists, that `herald <subcommand> -h` lists each
// --flag of its args, and that each HERALD_* variable of its environment is named there as "($HERALD_…)".
func TestChartPassesOnlyFlagsAndVariablesTheBinaryAccepts(t *testing.T) {
	bin := heraldBinary(t)
	helps := map[string]subcommandHelp{}
	helpErrs := map[string]error{}
	seen := map[string]bool{}
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			for _, obj := range objects(t, render(t, vs)) {
				if obj.GetKind() != "Deployment" && obj.GetKind() != "Job" {
					continue
				}
				for _, c := range containers(t, podSpec(t, obj)) {
					where := obj.GetKind() + " " + obj.GetName() + ", container " + c["name"].(string)
					if c["command"] != nil {
						t.Errorf("%s: sets command; the image's entrypoint is /herald and the subcommand goes in args", where)
					}
					args := stringList(c["args"])
					if len(args) == 0 || strings.HasPrefix(args[0], "-") {
						t.Errorf("%s: args %q do not start with a subcommand", where, args)
						continue
					}
					sub := args[0]
					seen[sub] = true
					h, ok := helps[sub]
					if !ok {
						if _, failed := helpErrs[sub]; !failed {
							var err error
							if h, err = helpOf(bin, sub); err != nil {
								helpErrs[sub] = err
								t.Errorf("%s runs herald %s, which the binary does not accept: %v", where, sub, err)
								continue
							}
							helps[sub] = h
						} else {
							continue
						}
					}
					for _, a := range args[1:] {
						if !strings.HasPrefix(a, "-") {
							t.Errorf("%s: argument %q is not a flag (pass flags as --name=value)", where, a)
							continue
						}
						name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
						if !h.flags[name] {
							t.Errorf("%s: herald %s has no flag --%s; its flags: %v", where, sub, name, sortedKeys(h.flags))
						}
					}
					for _, env := range envNames(c) {
						if !strings.HasPrefix(env, "HERALD_") {
							continue
						}
						if !h.envs[env] {
							t.Errorf("%s: herald %s reads no %s; it reads: %v", where, sub, env, sortedKeys(h.envs))
						}
					}
				}
			}
		})
	}
	for _, sub := range []string{"operator", "ingress", "webhook", "worker", "callbacks", "migrate"} {
		if !seen[sub] {
			t.Errorf("no value set renders a container running herald %s", sub)
		}
	}
}

// TestChartPassesEverySettingASubcommandReads checks the other direction: when a subcommand reads a
// variable that the chart sets for some component, the chart sets it for that subcommand too, so a value
// like messenger.rateLimit reaches every component that uses it. The full value set sets every value.
func TestChartPassesEverySettingASubcommandReads(t *testing.T) {
	bin := heraldBinary(t)
	objs := objects(t, render(t, valueSet{"full", "ci/full-values.yaml"}))
	chartVars := map[string]bool{}
	envOf := map[string][]string{}
	for _, obj := range objs {
		if obj.GetKind() != "Deployment" && obj.GetKind() != "Job" {
			continue
		}
		c := containers(t, podSpec(t, obj))[0]
		sub := stringList(c["args"])[0]
		envOf[sub] = envNames(c)
		for _, v := range envNames(c) {
			chartVars[v] = true
		}
	}
	for _, sub := range []string{"operator", "ingress", "webhook", "worker", "callbacks", "migrate"} {
		h, err := helpOf(bin, sub)
		if err != nil {
			t.Error(err)
			continue
		}
		for v := range h.envs {
			if chartVars[v] && !slices.Contains(envOf[sub], v) {
				t.Errorf("herald %s reads %s, which the chart sets for other components but not for %s: add it to herald.settings in templates/_helpers.tpl",
					sub, v, sub)
			}
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
