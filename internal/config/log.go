package config

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// SlogLevel parses LogLevel.
func (c *Log) SlogLevel() (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(c.LogLevel))); err != nil {
		return 0, fmt.Errorf("unknown log level %q", c.LogLevel)
	}
	return l, nil
}

// Logger builds the process logger (JSON by default).
func (c *Log) Logger(w io.Writer) *slog.Logger {
	level, _ := c.SlogLevel()
	opts := &slog.HandlerOptions{Level: level}
	if c.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
