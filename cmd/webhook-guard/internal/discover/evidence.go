package discover

import (
	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/webhook-guard/webhook-guard/policy"
)

// Configuration is one webhook configuration as the cluster stores it, or
// a CRD's conversion webhook or an APIService as one (TrustObject), with
// one entry.
type Configuration struct {
	Kind        policy.GuardedKind
	Name        string
	Annotations map[string]string
	// Group is the API group a CRD or an APIService serves; empty for a
	// webhook configuration.
	Group string
	// CABundleManagers are the field managers (managedFields) that own a
	// caBundle of any entry, sorted.
	CABundleManagers []string
	Webhooks         []Webhook
}

// Ref is "Kind/name", as messages name a configuration.
func (c Configuration) Ref() string { return string(c.Kind) + "/" + c.Name }

// Webhook is the part of one webhooks[] entry the inference and the health
// rules read; both kinds of configuration share these fields.
type Webhook struct {
	Name string
	// Service is clientConfig.service; nil for a URL-based webhook.
	Service *ServiceRef
	// URL is clientConfig.url, when set.
	URL               string
	CABundle          []byte
	FailurePolicy     *admv1.FailurePolicyType
	SideEffects       *admv1.SideEffectClass
	TimeoutSeconds    *int32
	NamespaceSelector *metav1.LabelSelector
	Rules             []admv1.RuleWithOperations
	MatchConditions   int
}

// ServiceRef is a webhook's clientConfig.service.
type ServiceRef struct {
	Namespace, Name string
}

func (s ServiceRef) String() string { return s.Namespace + "/" + s.Name }

// Cluster is the evidence the cluster holds around the configurations.
type Cluster struct {
	// Services by "namespace/name"; a missing key means the Service does
	// not exist.
	Services map[string]Service
	// Workloads are the Deployments, StatefulSets and DaemonSets of the
	// namespaces the webhooks' Services live in.
	Workloads []Workload
	// Sources are the Secret and ConfigMap keys that hold PEM certificates.
	Sources []Source
	// Namespaces are the labels of each existing namespace, by name.
	Namespaces map[string]map[string]string
	// CAInjector is cainjector's service account ("namespace/name"), for
	// the evidence of injected configurations.
	CAInjector string
}

// Service is a Service and how many ready endpoints its EndpointSlices list.
type Service struct {
	Namespace, Name string
	Selector        map[string]string
	ReadyEndpoints  int
}

// Selects is the Service's selector applied to pod template labels; an
// empty selector selects nothing (such a Service has hand-made endpoints).
func (s Service) Selects(labels map[string]string) bool {
	if len(s.Selector) == 0 {
		return false
	}
	for k, v := range s.Selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// Workload is a pod controller and what its pod template runs as and mounts.
type Workload struct {
	// Kind is Deployment, StatefulSet or DaemonSet.
	Kind            string
	Namespace, Name string
	// TemplateLabels are the pod template's labels (what a Service selects).
	TemplateLabels map[string]string
	// ServiceAccount is the template's serviceAccountName ("default" when unset).
	ServiceAccount string
	// Secrets and ConfigMaps are the names its volumes mount (projected
	// sources included).
	Secrets, ConfigMaps []string
}

// Ref is "Kind namespace/name".
func (w Workload) Ref() string { return w.Kind + " " + w.Namespace + "/" + w.Name }

// SourceKind says whether a Source is a Secret or a ConfigMap key.
type SourceKind string

// Source kinds.
const (
	SourceSecret    SourceKind = "Secret"
	SourceConfigMap SourceKind = "ConfigMap"
)

// Source is one key of a Secret or ConfigMap whose value is PEM.
type Source struct {
	Kind            SourceKind
	Namespace, Name string
	Key             string
	PEM             []byte
	// Certificate is the cert-manager Certificate (in the same namespace)
	// whose spec.secretName this Secret is; empty otherwise.
	Certificate string
}

// Ref is "Kind namespace/name".
func (s Source) Ref() string { return string(s.Kind) + " " + s.Namespace + "/" + s.Name }
