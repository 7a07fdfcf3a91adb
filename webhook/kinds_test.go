package webhook

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// Test_decodeReview_everyKind walks guardapi.Kinds: an UPDATE of each
// kind's example object (guardapi.KindInfo.Example), encoded as
// kube-apiserver sends it, decodes into the one entry the object holds,
// named as the row names it, with the caBundle before and after. A kind
// whose entries the decoder does not read (no entryDecoders entry) is
// rejected as not guarded and fails here: its caBundle changes would
// never be checked.
func Test_decodeReview_everyKind(t *testing.T) {
	oldCA, newCA := []byte("old-ca"), []byte("new-ca")
	for _, k := range guardapi.Kinds {
		t.Run(k.Kind, func(t *testing.T) {
			encode := func(bundle []byte) runtime.RawExtension {
				raw, err := json.Marshal(k.Example(bundle))
				require.NoError(t, err)
				return runtime.RawExtension{Raw: raw}
			}
			in, err := decodeInput(t, &admissionv1.AdmissionRequest{
				UID:       "705ab4f5-6393-11e8-b7cc-42010a800002",
				Kind:      metav1.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind},
				Resource:  metav1.GroupVersionResource{Group: k.Group, Version: k.Version, Resource: k.Resource},
				Name:      k.ExampleName(),
				Operation: admissionv1.Update,
				UserInfo:  authenticationv1.UserInfo{Username: koordManager},
				Object:    encode(newCA),
				OldObject: encode(oldCA),
			})
			require.NoError(t, err)
			assert.Equal(t, policy.GuardedKind(k.Kind), in.Kind)
			name := k.Entries.Name
			if !k.Entries.One() {
				name = "example.webhook-guard.io"
			}
			for which, got := range map[string][]policy.Entry{"Entries": in.Entries, "OldEntries": in.OldEntries} {
				require.Len(t, got, 1, which)
				assert.Equal(t, name, got[0].Name, which)
			}
			assert.Equal(t, newCA, in.Entries[0].CABundle)
			assert.Equal(t, oldCA, in.OldEntries[0].CABundle)
		})
	}
}
