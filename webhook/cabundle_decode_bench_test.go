package webhook

import (
	"encoding/json"
	"fmt"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/webhook-guard/webhook-guard/policy"
)

// BenchmarkDecodeReview measures what keeping decoded caBundles saves:
// the same review (an owner rotating 5 entries from one ~1 KB CA to the
// next) decoded with the bundles already seen (cache=warm, the common case:
// a review repeats the stored bundles, and an owner re-writes its own) and
// with the cache emptied before every decode (cache=cold: each of the
// review's two distinct bundles is decoded once, as for the first write of
// a rotation or under a stream of distinct bundles). Compare the two rows
// of one run.
func BenchmarkDecodeReview(b *testing.B) {
	fx := testFixtures(b)
	bundles := func(pem []byte) [][]byte {
		out := make([][]byte, 5)
		for i := range out {
			out[i] = pem
		}
		return out
	}
	req := request(b, admissionv1.Update, policy.KindValidating, koordManager,
		&object{Name: "koord", Bundles: bundles(fx.OwnerNew.PEM)}, &object{Name: "koord", Bundles: bundles(fx.Owner.PEM)})
	body, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
	if err != nil {
		b.Fatal(err)
	}
	for _, cache := range []string{"warm", "cold"} {
		b.Run(fmt.Sprintf("cache=%s", cache), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if cache == "cold" {
					decodedBundles.mu.Lock()
					clear(decodedBundles.m)
					decodedBundles.mu.Unlock()
				}
				if _, err := decodeReview(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
