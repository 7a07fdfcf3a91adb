package webhook

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/webhook-guard/webhook-guard/webhook/casource"
)

// samplesDir holds the sample config and reviews the tests reuse.
var samplesDir = filepath.Join("..", "config", "samples")

// testHandler is the real handler on the koordinator sample config (enforce),
// with the real CA resolver reading a fake API holding the owner's CA Secret.
// It returns the owner's CA PEM too.
func testHandler(t testing.TB) (*Handler, []byte) {
	t.Helper()
	cfg, _, err := LoadConfigFile(filepath.Join(samplesDir, "guard-koordinator.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	owner := sampleReview(t, "owner.json")
	var obj guardedObject
	if err := json.Unmarshal(owner.Request.Object.Raw, &obj); err != nil {
		t.Fatal(err)
	}
	ca := obj.Webhooks[0].ClientConfig.CABundle
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "koordinator-system", Name: "webhook-certs"},
		Data:       map[string][]byte{"ca.crt": ca},
	}
	s, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	reader := fake.NewClientBuilder().WithScheme(s).WithObjects(secret).Build()
	return newHandler(t, HandlerOptions{
		Config:   StaticConfig{Config: cfg},
		CA:       casource.New(reader, casource.Options{}),
		Recorder: LogRecorder{Log: logr.Discard()},
	}), ca
}

// sampleReview reads config/samples/reviews/<name>.
func sampleReview(t testing.TB, name string) *admissionv1.AdmissionReview {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(samplesDir, "reviews", name))
	if err != nil {
		t.Fatal(err)
	}
	var r admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return &r
}
