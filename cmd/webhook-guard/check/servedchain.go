package check

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/webhook/probe"
)

// servedChains reads each --served-chain [ENTRY=]FILE as what the reviewed
// object's entry (every entry when ENTRY is left out) serves, so that the
// write is decided as the server decides it after a probe round: the
// warning, or with verifyServing: deny the refusal, of a caBundle that does
// not verify it. The server name each chain is verified for is the entry's
// (its URL's host, or <service>.<namespace>.svc), from the review's object.
func servedChains(flags []string, cfg *policy.Mappings, body []byte) (*probe.Served, error) {
	obj, err := reviewedObject(body)
	if err != nil {
		return nil, cmdutil.Invalid("--served-chain: %v", err)
	}
	paths, err := probe.ObjectPaths(cfg, obj)
	if err != nil {
		return nil, cmdutil.Invalid("--served-chain: the review's object: %v", err)
	}
	if len(paths) == 0 {
		return nil, cmdutil.Invalid("--served-chain: no mapping guards %s %q, so no entry of it is checked against a served chain", obj.GetKind(), obj.GetName())
	}
	served := &probe.Served{}
	for _, flag := range flags {
		entry, file, named := strings.Cut(flag, "=")
		if !named {
			entry, file = "", flag
		}
		pemChain, err := os.ReadFile(file)
		if err != nil {
			return nil, cmdutil.Invalid("--served-chain %s: %v", flag, err)
		}
		matched := 0
		for _, p := range paths {
			if entry != "" && p.Webhook != entry {
				continue
			}
			matched++
			// The base name: the detail goes into a warning cut at 256 characters.
			if err := served.StoreChain(p, "file "+filepath.Base(file), pemChain); err != nil {
				return nil, cmdutil.Invalid("--served-chain %s: %v", flag, err)
			}
		}
		if matched == 0 {
			return nil, cmdutil.Invalid("--served-chain %s: %s %q has no entry %q (its entries: %s)",
				flag, obj.GetKind(), obj.GetName(), entry, strings.Join(entryNames(paths), ", "))
		}
	}
	return served, nil
}

// reviewedObject is the review's request.object.
func reviewedObject(body []byte) (*unstructured.Unstructured, error) {
	var r admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("the review does not parse: %w", err)
	}
	if r.Request == nil || len(r.Request.Object.Raw) == 0 {
		return nil, fmt.Errorf("the review has no request.object (a DELETE writes no caBundle)")
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(r.Request.Object.Raw); err != nil {
		return nil, fmt.Errorf("request.object: %w", err)
	}
	return u, nil
}

func entryNames(paths []probe.TrustPath) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		out = append(out, p.Webhook)
	}
	return slices.Compact(out)
}
