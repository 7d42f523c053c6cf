package k8stest

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
)

// PolicyRule is one rule of an RBAC Role.
type PolicyRule struct {
	APIGroups []string `json:"apiGroups"`
	Resources []string `json:"resources"`
	Verbs     []string `json:"verbs"`
}

// SubmitterRules are the rights of Cluster.Restricted in its namespace,
// and nothing cluster-wide: create, watch and delete Jobs and Secrets,
// read their pods (status, logs) and the events about them. What the
// Kubernetes engine's docs say its submitting identity needs is tested
// against these.
var SubmitterRules = []PolicyRule{
	{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create", "get", "list", "watch", "delete", "patch"}},
	{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "get", "delete", "patch"}},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"}},
}

// NewUser returns a client for a fresh user (tenant-N) whose only rights
// are rules, in namespace ns (a Role and a RoleBinding named after the
// user). A cluster has 64 such users.
func (c *Cluster) NewUser(ctx context.Context, ns string, rules []PolicyRule) (*Client, error) {
	cp := c.cp
	cp.mu.Lock()
	i := cp.nextTenant
	if i < len(cp.pki.tenants) {
		cp.nextTenant++
	}
	cp.mu.Unlock()
	if i >= len(cp.pki.tenants) {
		return nil, fmt.Errorf("k8stest: all %d restricted users are taken", len(cp.pki.tenants))
	}
	user := fmt.Sprintf("tenant-%d", i)
	role := map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
		"metadata": map[string]any{"name": user, "namespace": ns},
		"rules":    rules,
	}
	if err := cp.admin.Do(ctx, http.MethodPost, "/apis/rbac.authorization.k8s.io/v1/namespaces/"+ns+"/roles", role, nil); err != nil {
		return nil, fmt.Errorf("creating the role of %s: %w", user, err)
	}
	binding := map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
		"metadata": map[string]any{"name": user, "namespace": ns},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": user},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}},
	}
	if err := cp.admin.Do(ctx, http.MethodPost, "/apis/rbac.authorization.k8s.io/v1/namespaces/"+ns+"/rolebindings", binding, nil); err != nil {
		return nil, fmt.Errorf("binding the role of %s: %w", user, err)
	}
	kubeconfig := filepath.Join(cp.dir, user+".kubeconfig")
	if err := writeKubeconfig(kubeconfig, cp.server, cp.pki.caPEM, user, cp.pki.tenants[i], ns); err != nil {
		return nil, err
	}
	return newClient(cp.server, cp.pki.caPEM, user, cp.pki.tenants[i], kubeconfig)
}

// newCluster makes a namespace (test-N), waits for its default service
// account (the controller-manager makes it; pods are refused without
// it), and a restricted user with SubmitterRules in it.
func (cp *controlPlane) newCluster(ctx context.Context) (*Cluster, error) {
	cp.mu.Lock()
	ns := fmt.Sprintf("test-%d", cp.nextNS)
	cp.nextNS++
	cp.mu.Unlock()
	obj := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}
	if err := cp.admin.Do(ctx, http.MethodPost, "/api/v1/namespaces", obj, nil); err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	if err := poll(ctx, "the default service account of "+ns, nil, func(ctx context.Context) error {
		return cp.admin.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+ns+"/serviceaccounts/default", nil, nil)
	}); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(cp.dir, ns+".kubeconfig")
	if err := writeKubeconfig(kubeconfig, cp.server, cp.pki.caPEM, "admin", cp.pki.admin, ns); err != nil {
		return nil, err
	}
	c := &Cluster{Server: cp.server, Kubeconfig: kubeconfig, Namespace: ns, CA: cp.pki.caPEM, Dir: cp.dir, Admin: cp.admin, cp: cp}
	var err error
	if c.Restricted, err = c.NewUser(ctx, ns, SubmitterRules); err != nil {
		return nil, err
	}
	return c, nil
}
