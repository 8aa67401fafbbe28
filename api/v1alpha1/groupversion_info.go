// Package v1alpha1 holds the Herald operator's API: Tenant (cluster-scoped) and ApiKey (namespaced), in the
// group notify.herald.dev.
//
// +kubebuilder:object:generate=true
// +groupName=notify.herald.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of these objects.
	GroupVersion = schema.GroupVersion{Group: "notify.herald.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion} //nolint:staticcheck // kubebuilder's layout, which the types' init() use; leaving it is a change of its own

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
