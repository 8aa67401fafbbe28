package config

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/heraldhq/herald/internal/tracing"
)

// SlogLevel parses LogLevel.
func (c *Log) SlogLevel() (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(c.LogLevel))); err != nil {
		return 0, fmt.Errorf("unknown log level %q", c.LogLevel)
	}
	return l, nil
}

// Logger builds the process logger (JSON by default). A line logged with a context that carries a span
// names its trace (trace_id, span_id).
func (c *Log) Logger(w io.Writer) *slog.Logger {
	level, _ := c.SlogLevel()
	opts := &slog.HandlerOptions{Level: level}
	if c.LogFormat == "text" {
		return slog.New(tracing.LogHandler(slog.NewTextHandler(w, opts)))
	}
	return slog.New(tracing.LogHandler(slog.NewJSONHandler(w, opts)))
}
