package framework

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// WriterRole may do everything to webhook configurations and ConfigMaps;
// every test identity is bound to it, so that only the guard (never RBAC)
// decides their webhook configuration writes.
const WriterRole = "e2e-webhook-configuration-writer"

// ServiceAccountUser is the identity kube-apiserver authenticates a service
// account token as.
func ServiceAccountUser(namespace, name string) envtest.User {
	return envtest.User{
		Name:   "system:serviceaccount:" + namespace + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace},
	}
}

// Client acts as one user.
type Client struct {
	User envtest.User
	// Config is the user's REST config; its warning handler feeds Warnings.
	Config *rest.Config
	Kube   kubernetes.Interface
	// Warnings collects every warning header the API server returned.
	Warnings *Warnings
}

// Warnings records the warning headers a client receives.
type Warnings struct {
	mu   sync.Mutex
	list []string
}

// HandleWarningHeader implements rest.WarningHandler.
func (w *Warnings) HandleWarningHeader(code int, agent, text string) {
	if code != 299 || text == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// Take returns the warnings received since the last Take and forgets them.
func (w *Warnings) Take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// Containing returns the warnings (not taken) that contain s.
func Containing(warnings []string, s string) []string {
	var out []string
	for _, w := range warnings {
		if strings.Contains(w, s) {
			out = append(out, w)
		}
	}
	return out
}

// ServiceAccount returns a client acting as system:serviceaccount:ns:name.
func (e *Env) ServiceAccount(t testing.TB, namespace, name string) *Client {
	t.Helper()
	return e.Client(t, ServiceAccountUser(namespace, name))
}

// Client returns a client acting as user, with RBAC to write webhook
// configurations, CRDs, APIServices and ConfigMaps (so RBAC never hides the
// guard's answer).
// Users in system:masters need no binding.
func (e *Env) Client(t testing.TB, user envtest.User) *Client {
	t.Helper()
	e.rbacOnce.Do(func() { e.createWriterRole(t) })
	masters := false
	for _, g := range user.Groups {
		masters = masters || g == "system:masters"
	}
	if !masters {
		sum := sha256.Sum256([]byte(user.Name))
		e.bind(t, "e2e-writer-"+hex.EncodeToString(sum[:6]), WriterRole, user.Name)
	}
	c := e.provision(t, user, &rest.Config{QPS: 200, Burst: 400})
	if !masters {
		// RBAC reaches the authorizer through an informer; wait for it.
		Eventually(t, 10*time.Second, user.Name+" may list webhook configurations", func() bool {
			_, err := c.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(context.Background(), metav1.ListOptions{Limit: 1})
			return err == nil
		})
	}
	return c
}

// provision is a Client acting as user with base's rate limits, whatever
// RBAC user has.
func (e *Env) provision(t testing.TB, user envtest.User, base *rest.Config) *Client {
	t.Helper()
	au, err := e.addUser(user, base)
	if err != nil {
		t.Fatalf("provision user %s: %v", user.Name, err)
	}
	cfg := rest.CopyConfig(au.Config())
	w := &Warnings{}
	cfg.WarningHandler = w
	return &Client{User: user, Config: cfg, Kube: kubernetes.NewForConfigOrDie(cfg), Warnings: w}
}

func (e *Env) createWriterRole(t testing.TB) {
	t.Helper()
	verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	_, err := e.AdminKube.RbacV1().ClusterRoles().Create(context.Background(), &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: WriterRole},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"}, Verbs: verbs},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: verbs},
			{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: verbs},
			{APIGroups: []string{"apiregistration.k8s.io"}, Resources: []string{"apiservices"}, Verbs: verbs},
		},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create ClusterRole %s: %v", WriterRole, err)
	}
}

// AdminClient acts as the envtest admin (system:masters), with warnings
// captured.
func (e *Env) AdminClient(t testing.TB) *Client {
	t.Helper()
	return e.Client(t, envtest.User{Name: "e2e-admin", Groups: []string{"system:masters"}})
}

// addUser provisions an identity; envtest's AddUser is not safe for
// concurrent use (its CA's serial counter), and parallel subtests share an Env.
func (e *Env) addUser(user envtest.User, base *rest.Config) (*envtest.AuthenticatedUser, error) {
	e.addUserMu.Lock()
	defer e.addUserMu.Unlock()
	return e.testEnv.AddUser(user, base)
}
