package discover

import (
	"testing"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/webhook"
)

// Test_Gather checks what the list calls are turned into: ready
// endpoints counted as the EndpointSlice API defines them, projected volumes
// followed, a Certificate's Secret marked, and objects of namespaces no
// webhook's Service lives in dropped.
func Test_Gather(t *testing.T) {
	ca, err := testpki.NewCA("app-ca")
	require.NoError(t, err)
	scheme, err := webhook.NewScheme()
	require.NoError(t, err)
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "app-webhook-1", Labels: map[string]string{discoveryv1.LabelServiceName: "app-webhook"}},
		AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: new(true)}},
			{Addresses: []string{"10.0.0.2"}}, // ready unknown counts as ready
			{Addresses: []string{"10.0.0.3"}, Conditions: discoveryv1.EndpointConditions{Ready: new(false)}},
		}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app", Labels: map[string]string{"team": "a"}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "app-webhook"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "ctrl"}}},
		slice,
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "ctrl"}, Spec: appsv1.StatefulSetSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "ctrl"}},
			Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "certs", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "serving"}}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "bundle"}}},
			}}}}}},
		}}},
		&cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "serving-cert"}, Spec: cmapi.CertificateSpec{SecretName: "serving"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "serving"}, Data: map[string][]byte{"ca.crt": ca.PEM, "tls.key": ca.KeyPEM}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "bundle"}, Data: map[string]string{"ca.crt": string(ca.PEM), "note": "not PEM"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Name: "unrelated"}, Data: map[string][]byte{"ca.crt": ca.PEM}},
		&admv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Webhooks: []admv1.ValidatingWebhook{{
			Name: "w.app.io", SideEffects: ptr.To(admv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
			ClientConfig: admv1.WebhookClientConfig{Service: &admv1.ServiceReference{Namespace: "app", Name: "app-webhook"}},
		}}},
	).Build()

	configs, cl, err := Gather(t.Context(), c, "cert-manager/cert-manager-cainjector")
	require.NoError(t, err)
	require.Len(t, configs, 1)
	assert.Equal(t, &ServiceRef{Namespace: "app", Name: "app-webhook"}, configs[0].Webhooks[0].Service)
	assert.Equal(t, map[string]Service{"app/app-webhook": {Namespace: "app", Name: "app-webhook", Selector: map[string]string{"app": "ctrl"}, ReadyEndpoints: 2}}, cl.Services)
	assert.Equal(t, []Workload{{Kind: "StatefulSet", Namespace: "app", Name: "ctrl", TemplateLabels: map[string]string{"app": "ctrl"},
		ServiceAccount: "default", Secrets: []string{"serving"}, ConfigMaps: []string{"bundle"}}}, cl.Workloads)
	assert.Equal(t, []Source{
		{Kind: SourceSecret, Namespace: "app", Name: "serving", Key: "ca.crt", PEM: ca.PEM, Certificate: "serving-cert"},
		{Kind: SourceConfigMap, Namespace: "app", Name: "bundle", Key: "ca.crt", PEM: ca.PEM},
	}, cl.Sources)
	assert.Equal(t, map[string]string{"team": "a"}, cl.Namespaces["app"])
}
