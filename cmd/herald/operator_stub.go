//go:build nooperator

package main

import (
	"errors"

	"github.com/heraldhq/herald/internal/config"
)

// operatorCmd is `herald operator` in a build without it (-tags nooperator): a binary for the HTTP
// components that does not link, nor initialise at start, the Kubernetes client libraries.
type operatorCmd struct{ config.Operator }

func (c *operatorCmd) Run(runEnv) error {
	return errors.New("this herald is built without the operator (-tags nooperator)")
}
