// Package rbactest lets envtest tests run the operator as its own ServiceAccount, holding exactly the
// permissions of config/rbac (generated from the controllers' RBAC markers) and of the RoleBinding a
// platform team adds per API-key namespace (config/samples), instead of envtest's all-powerful admin.
// A permission the code needs and the markers forgot then fails the test, and so does one they grant
// and should not.
package rbactest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/heraldhq/herald/internal/testing/reporoot"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Names of config/rbac.
const (
	OperatorRole      = "herald-operator"
	SecretsRole       = "herald-operator-secrets"
	MetricsReaderRole = "herald-operator-metrics-reader"
	serviceAccount    = "herald-operator"
)

// Identity is the operator's ServiceAccount in a namespace of its own, bound as config/rbac binds it.
type Identity struct {
	Namespace string
	// Config acts as the ServiceAccount (impersonation by envtest's admin).
	Config *rest.Config
	// User is the ServiceAccount's user name, system:serviceaccount:<namespace>:herald-operator.
	User string

	t      testing.TB
	admin  client.Client
	suffix string
}

// Install creates the ServiceAccount herald-operator in namespace ns (created too), the ClusterRoles of
// config/rbac/role.yaml (named <name>-<ns>, so tests do not share them) and the bindings of
// config/rbac: the operator ClusterRole cluster-wide, the leader-election Role in ns. Everything is
// deleted at the end of the test.
func Install(t testing.TB, admin client.Client, base *rest.Config, ns string) *Identity {
	t.Helper()
	id := &Identity{Namespace: ns, User: "system:serviceaccount:" + ns + ":" + serviceAccount, t: t, admin: admin, suffix: ns}
	id.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	id.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: serviceAccount}})

	for _, doc := range documents(t, "config/rbac/role.yaml") {
		var role rbacv1.ClusterRole
		decode(t, doc, &role)
		role.Name = id.ClusterRole(role.Name)
		id.create(&role)
	}
	var crb rbacv1.ClusterRoleBinding
	decode(t, documents(t, "config/rbac/role_binding.yaml")[0], &crb)
	crb.Name = id.ClusterRole(crb.Name)
	crb.RoleRef.Name = id.ClusterRole(crb.RoleRef.Name)
	crb.Subjects = id.subjects(crb.Subjects)
	id.create(&crb)

	var le rbacv1.Role
	decode(t, documents(t, "config/rbac/leader_election_role.yaml")[0], &le)
	le.Namespace = ns
	id.create(&le)
	var leb rbacv1.RoleBinding
	decode(t, documents(t, "config/rbac/leader_election_role_binding.yaml")[0], &leb)
	leb.Namespace = ns
	leb.Subjects = id.subjects(leb.Subjects)
	id.create(&leb)

	cfg := rest.CopyConfig(base)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: id.User,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	id.Config = cfg
	return id
}

// ClusterRole is the name this test gave the ClusterRole called name in config/rbac.
func (id *Identity) ClusterRole(name string) string { return name + "-" + id.suffix }

// GrantSecrets adds the RoleBinding of config/samples/operator_secrets_rolebinding.yaml in namespace ns:
// what a platform team does for each namespace a Tenant lists.
func (id *Identity) GrantSecrets(ns string) {
	id.t.Helper()
	var rb rbacv1.RoleBinding
	decode(id.t, documents(id.t, "config/samples/operator_secrets_rolebinding.yaml")[0], &rb)
	if rb.RoleRef.Name != SecretsRole {
		id.t.Fatalf("config/samples/operator_secrets_rolebinding.yaml binds %s, want %s", rb.RoleRef.Name, SecretsRole)
	}
	rb.Namespace = ns
	rb.RoleRef.Name = id.ClusterRole(rb.RoleRef.Name)
	rb.Subjects = id.subjects(rb.Subjects)
	id.create(&rb)
}

// Can reports whether the ServiceAccount may do verb on resource (group/resource, "" group for the core
// API) in namespace ns ("" for every namespace), as the API server's authorizer answers.
func (id *Identity) Can(verb, group, resource, ns string) bool {
	id.t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   id.User,
		Groups: id.Config.Impersonate.Groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: verb, Group: group, Resource: resource,
		},
	}}
	if err := id.admin.Create(context.Background(), sar); err != nil {
		id.t.Fatalf("SubjectAccessReview: %v", err)
	}
	return sar.Status.Allowed
}

// subjects points the operator's ServiceAccount subjects of a config/rbac binding at this identity.
func (id *Identity) subjects(in []rbacv1.Subject) []rbacv1.Subject {
	id.t.Helper()
	if len(in) != 1 || in[0].Kind != "ServiceAccount" || in[0].Name != serviceAccount {
		id.t.Fatalf("binding subjects %+v, want the ServiceAccount %s", in, serviceAccount)
	}
	return []rbacv1.Subject{{Kind: "ServiceAccount", Name: serviceAccount, Namespace: id.Namespace}}
}

func (id *Identity) create(obj client.Object) {
	id.t.Helper()
	if err := id.admin.Create(context.Background(), obj); err != nil {
		id.t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
	id.t.Cleanup(func() { _ = id.admin.Delete(context.Background(), obj) })
}

// documents reads the YAML documents of a file of the repository.
func documents(t testing.TB, rel string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if len(bytes.TrimSpace(doc)) > 0 && !bytes.Equal(bytes.TrimSpace(doc), []byte("---")) {
			out = append(out, doc)
		}
	}
}

func decode(t testing.TB, doc []byte, into any) {
	t.Helper()
	if err := utilyaml.Unmarshal(doc, into); err != nil {
		t.Fatalf("decoding %s: %v", doc, err)
	}
}

var repoRoot = reporoot.Dir
