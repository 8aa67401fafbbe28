package controllers

import (
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
)

// ControllerOptions tune how the reconcilers are registered.
type ControllerOptions struct {
	// SkipNameValidation allows several managers with these controllers in one process (tests).
	SkipNameValidation bool
}

// controller is a controller's options, with workers reconciles at once.
func (o ControllerOptions) controller(workers int) controller.Options {
	return controller.Options{SkipNameValidation: ptr.To(o.SkipNameValidation), MaxConcurrentReconciles: workers}
}
