package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/alecthomas/kong"
)

// The generated part of docs/configuration.md lies between these lines; the prose around it is written
// by hand.
const (
	docsBegin = "<!-- BEGIN SETTINGS: generated from internal/config by `make docs`; edit there, not here -->"
	docsEnd   = "<!-- END SETTINGS -->"
)

// setting is one row of the table: a variable and what the commands reading it make of it.
type setting struct {
	flag     *kong.Flag
	usedBy   []string
	defaults map[string]string // command → its default, where it differs from the first command's (herald dev's)
}

// SettingsTable renders every HERALD_* setting of a grammar as a Markdown table: variable, flag,
// meaning, default, and the commands that read it, in the order the grammar declares them.
func SettingsTable(app *kong.Application) string {
	var order []string
	rows := map[string]*setting{}
	add := func(f *kong.Flag, command string) {
		if len(f.Envs) == 0 || f.Hidden {
			return
		}
		env := f.Envs[0]
		s, ok := rows[env]
		if !ok {
			s = &setting{flag: f, defaults: map[string]string{}}
			rows[env] = s
			order = append(order, env)
		}
		if !slices.Contains(s.usedBy, command) {
			s.usedBy = append(s.usedBy, command)
		}
		if f.Default != s.flag.Default {
			s.defaults[command] = f.Default
		}
	}
	var walk func(n *kong.Node)
	walk = func(n *kong.Node) {
		if n.Type == kong.CommandNode && len(n.Flags) > 0 {
			for _, f := range n.Flags {
				add(f, commandName(n))
			}
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(app.Node)
	for _, f := range app.Flags {
		add(f, "every command")
	}

	var b strings.Builder
	b.WriteString("| variable | flag | meaning | default | used by |\n|---|---|---|---|---|\n")
	for _, env := range order {
		s := rows[env]
		f := s.flag
		fmt.Fprintf(&b, "| `%s` | `--%s` | %s | %s | %s |\n", env, f.Name, cell(f.Help), defaultCell(s), strings.Join(s.usedBy, ", "))
	}
	return b.String()
}

func defaultCell(s *setting) string {
	d := "none"
	if s.flag.Default != "" {
		d = "`" + s.flag.Default + "`"
	}
	for _, command := range s.usedBy {
		if command == "dev" && s.flag.Tag.Get("dev") != "" {
			d += " (dev: " + cell(s.flag.Tag.Get("dev")) + ")"
		} else if v, ok := s.defaults[command]; ok {
			d += " (" + command + ": `" + v + "`)"
		}
	}
	return d
}

// commandName is how the table names a command: the admin commands by their group (tenant, apikey); a
// command that runs by default under its parent (herald webhook's hidden "serve") by the parent; a
// subcommand of a runnable command by its full path (webhook set-url).
func commandName(n *kong.Node) string {
	var path []*kong.Node
	for p := n; p != nil && p.Type == kong.CommandNode; p = p.Parent {
		path = append([]*kong.Node{p}, path...)
	}
	top := path[0]
	if len(path) > 1 && top.DefaultCmd != nil && n != top.DefaultCmd {
		return top.Name + " " + n.Name
	}
	return top.Name
}

// cell escapes text for a Markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;", "\n", " ").Replace(s)
}

// UpdateDocs returns doc with its generated settings table replaced by table.
func UpdateDocs(doc, table string) (string, error) {
	before, rest, ok := strings.Cut(doc, docsBegin)
	if !ok {
		return "", fmt.Errorf("no %q line", docsBegin)
	}
	_, after, ok := strings.Cut(rest, docsEnd)
	if !ok {
		return "", fmt.Errorf("no %q line", docsEnd)
	}
	return before + docsBegin + "\n" + table + docsEnd + after, nil
}
