package offline

import (
	"bytes"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/webhook"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
)

// NewHandler is the server's handler over a fixed GuardConfig, resolving CA
// sources against objects. admissionPolicyWriter is the username of the
// guard's own service account (serve --policy-guard-service-account), or
// empty. A CA source in objects that holds garbage is cluster state,
// decided (ca-unavailable) as the server decides it. serving is what the
// entries' endpoints served (check --served-chain), or nil.
func NewHandler(cfg *policy.Mappings, objects *Objects, admissionPolicyWriter string, serving policy.ServingCheck) (*webhook.Handler, error) {
	return webhook.NewHandler(webhook.HandlerOptions{
		Config:                webhook.StaticConfig{Config: cfg},
		Serving:               serving,
		CA:                    casource.New(objects, casource.Options{}),
		AdmissionPolicyWriter: admissionPolicyWriter,
		Log:                   logr.Discard(),
	})
}

// ReadReview reads a review file as the JSON body the server would be sent.
// JSON (and an empty file) is passed on byte for byte, so that the decoder
// sees exactly what the server would: duplicate members and invalid UTF-8
// are its to reject. YAML is converted to JSON first, rejecting duplicate
// keys; what is neither a JSON nor a YAML object is passed on for the
// decoder to reject as the server would.
func ReadReview(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(data)) == 0 || utilyaml.IsJSONBuffer(data) {
		return data, nil
	}
	jsonData, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("not JSON, and not valid YAML: %w", err)
	}
	if !utilyaml.IsJSONBuffer(jsonData) {
		return data, nil
	}
	return jsonData, nil
}
