package main

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"github.com/heraldhq/herald/internal/testing/pgtest"
	"github.com/heraldhq/herald/internal/testing/syncbuf"
)

// variableName is a HERALD_* variable; a family of them (HERALD_RETENTION_*) does not match.
var variableName = regexp.MustCompile(`HERALD_[A-Z0-9_]*[A-Z0-9]\b`)

// declaredVariables are the variables of every command's flags: each is in the --help of the commands that
// read it (TestHelpListsEverySettingWithItsVariableAndNoSecret).
func declaredVariables(t *testing.T) map[string]bool {
	t.Helper()
	declared := map[string]bool{}
	_ = kong.Visit(newParser(&cli{}, io.Discard, io.Discard).Model.Node, func(n kong.Visitable, next kong.Next) error {
		if f, ok := n.(*kong.Flag); ok {
			for _, env := range f.Envs {
				declared[env] = true
			}
		}
		return next(nil)
	})
	return declared
}

// Every variable herald reads is a setting, in the --help of the commands that read it: none is read behind
// the parser's back (a string in the code herald is built from), and docs/configuration.md names no other.
func TestEveryVariableHeraldReadsIsInAHelp(t *testing.T) {
	declared := declaredVariables(t)
	named := map[string][]string{} // variable: where it is named
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range variableName.FindAllString(string(doc), -1) {
		named[v] = append(named[v], "docs/configuration.md")
	}
	// The packages the binary is built from (not the tests and benchmarks, which have variables of their own).
	out, err := exec.Command("go", "list", "-deps", "-f", `{{if and .Module (eq .Module.Path "github.com/heraldhq/herald")}}{{.Dir}}{{end}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dirs := strings.Fields(string(out))
	if len(dirs) < 20 {
		t.Fatalf("herald is built from %d of its packages?", len(dirs))
	}
	fset := token.NewFileSet()
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, _ := strconv.Unquote(lit.Value)
					for _, v := range variableName.FindAllString(s, -1) {
						named[v] = append(named[v], fset.Position(lit.Pos()).String())
					}
				}
				return true
			})
		}
	}
	for v, where := range named {
		if !declared[v] {
			t.Errorf("%s is in no command's --help, yet named at %s", v, strings.Join(slices.Compact(where), ", "))
		}
	}
	if len(named) < len(declared) {
		t.Errorf("only %d variables named, of %d declared", len(named), len(declared))
	}
}

// herald dev runs the callback sender: it reads the sender's settings as herald callbacks does, and its
// --help lists them.
func TestDevRunsTheCallbackSenderWithItsSettings(t *testing.T) {
	t.Setenv("HERALD_DATABASE_URL", pgtest.NewDatabase(t))
	t.Setenv("HERALD_CALLBACK_CONCURRENCY", "7")
	t.Setenv("HERALD_CALLBACK_ENDPOINT_CONCURRENCY", "3")
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"dev", "--http-addr", "127.0.0.1:0", "--data-dir", t.TempDir()}, io.Discard, &stderr)
	}()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("herald dev did not stop within 30 s")
		}
	}()
	deadline := time.Now().Add(60 * time.Second)
	var started string
	for started == "" {
		for line := range strings.Lines(stderr.String()) {
			if strings.Contains(line, "callback sender started") {
				started = line
			}
		}
		select {
		case code := <-done:
			t.Fatalf("herald dev ended (%d):\n%s", code, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no callback sender started within 60 s:\n%s", stderr.String())
		}
	}
	if !strings.Contains(started, " concurrency=7 ") || !strings.Contains(started, " endpoint_concurrency=3 ") {
		t.Errorf("herald dev's sender, with HERALD_CALLBACK_CONCURRENCY=7 and HERALD_CALLBACK_ENDPOINT_CONCURRENCY=3: %s", started)
	}
	_, help, _ := herald(t, "dev", "-h")
	for _, v := range []string{"HERALD_CALLBACK_CONCURRENCY", "HERALD_CALLBACK_ENDPOINT_CONCURRENCY"} {
		if !strings.Contains(help, "($"+v+")") {
			t.Errorf("herald dev -h does not name %s", v)
		}
	}
}
