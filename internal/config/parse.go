package config

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/alecthomas/kong"
)

// Parser is kong's parser with Herald's contract added: after kong has read the command line and the
// HERALD_* variables, the selected command's settings are checked and every problem is reported at once.
type Parser struct {
	*kong.Kong
	env envCheck
}

// NewParser builds the parser of a kong grammar whose commands embed this package's settings. It refuses
// a grammar where a command reads settings without checking them, or where a typed setting has no
// default to fall back on when its variable does not parse.
func NewParser(grammar any, options ...kong.Option) (*Parser, error) {
	p := &Parser{}
	k, err := kong.New(grammar, append(options, kong.Resolvers(&p.env))...)
	if err != nil {
		return nil, err
	}
	p.Kong = k
	err = kong.Visit(k.Model.Node, func(n kong.Visitable, next kong.Next) error {
		node, ok := n.(*kong.Node)
		if !ok || node.Type != kong.CommandNode {
			return next(nil)
		}
		for _, f := range node.Flags {
			if len(f.Envs) == 0 {
				continue
			}
			if _, ok := node.Target.Addr().Interface().(checker); !ok {
				return fmt.Errorf("config: herald %s reads %s but its settings have no check method", node.Path(), f.Envs[0])
			}
			if f.Target.Kind() != reflect.String && !f.HasDefault {
				return fmt.Errorf("config: --%s is typed but has no default", f.Name)
			}
		}
		return next(nil)
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Parse parses args. A mistake on the command line is a *kong.ParseError (a usage error); settings that
// break their rules, or variables that do not parse, are one *Error listing every problem.
func (p *Parser) Parse(args []string) (*kong.Context, error) {
	p.env.problems = nil
	kctx, err := p.Kong.Parse(args)
	if err != nil {
		return kctx, err
	}
	probs := &problems{flags: map[uintptr]*kong.Flag{}, list: p.env.problems}
	for _, f := range kctx.Flags() {
		if f.Target.CanAddr() {
			probs.flags[f.Target.Addr().Pointer()] = f
		}
	}
	if sel := kctx.Selected(); sel != nil {
		if c, ok := sel.Target.Addr().Interface().(checker); ok {
			c.check(probs)
		}
	}
	if len(probs.list) > 0 {
		return kctx, &Error{Problems: probs.list}
	}
	return kctx, nil
}

// Error is an invalid configuration: one line per problem, each naming the variable and the flag.
type Error struct {
	Problems []string
}

func (e *Error) Error() string {
	return "invalid configuration:\n  " + strings.Join(e.Problems, "\n  ")
}

// checker is a command's settings: check adds a problem for every setting that breaks its rule.
type checker interface {
	check(p *problems)
}

// problems collects what is wrong. A rule names its setting by the field's address, so the message can
// say the variable and the flag exactly as kong knows them.
type problems struct {
	flags map[uintptr]*kong.Flag
	list  []string
}

func (p *problems) add(field any, format string, args ...any) {
	f := p.flags[reflect.ValueOf(field).Pointer()]
	if f == nil || len(f.Envs) == 0 {
		panic(fmt.Sprintf("config: a rule names a %T that is not a setting of this command", field))
	}
	p.list = append(p.list, fmt.Sprintf("%s (--%s): %s", f.Envs[0], f.Name, fmt.Sprintf(format, args...)))
}

// envCheck is a kong resolver. Kong reads the HERALD_* variables itself and would stop at the first one
// that does not parse as its setting's type; this resolver, which kong consults for every setting the
// command line did not give, records such a variable as a problem instead and falls back to the default,
// so it is reported together with every other problem. As before kong, an empty variable of a typed
// setting means its default.
type envCheck struct {
	problems []string
}

func (r *envCheck) Validate(*kong.Application) error { return nil }

func (r *envCheck) Resolve(_ *kong.Context, _ *kong.Path, flag *kong.Flag) (any, error) {
	for _, env := range flag.Envs {
		v, ok := os.LookupEnv(env)
		if !ok {
			continue
		}
		if flag.Target.Kind() == reflect.String {
			return nil, nil // any string is one; kong has applied it
		}
		if strings.TrimSpace(v) == "" {
			return flag.Default, nil
		}
		scratch := reflect.New(flag.Target.Type()).Elem()
		scan := kong.ScanFromTokens(kong.Token{Type: kong.FlagValueToken, Value: v})
		err := flag.Mapper.Decode(&kong.DecodeContext{Value: flag.Value, Scan: scan}, scratch)
		if err == nil {
			return nil, nil // kong has applied it
		}
		r.problems = append(r.problems, fmt.Sprintf("%s (--%s): %s", env, flag.Name, notA(flag.Target.Type(), v, err)))
		return flag.Default, nil
	}
	return nil, nil
}

// notA says why v is not a value of type t. Only typed settings get here, and none of them is a secret,
// so quoting the value is safe.
func notA(t reflect.Type, v string, err error) string {
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return fmt.Sprintf("%q is not a duration (like 1s, 2m)", v)
	case t.Kind() == reflect.Bool:
		return fmt.Sprintf("%q is not true or false", v)
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return fmt.Sprintf("%q is not an integer", v)
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return fmt.Sprintf("%q is not a number", v)
	}
	return err.Error()
}
