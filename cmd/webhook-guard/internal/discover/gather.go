package discover

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	admv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
	"github.com/webhook-guard/webhook-guard/webhook/endpointslices"
)

// Gather reads what discover and scan's health checks need, with
// list calls only (one per resource, cluster-wide, so the count of API
// calls does not grow with the number of configurations), and keeps the
// objects of the namespaces the webhooks' Services and cert-manager
// Certificates live in.
func Gather(ctx context.Context, c client.Reader, caInjector string) ([]Configuration, Cluster, error) {
	cl := Cluster{Services: map[string]Service{}, Namespaces: map[string]map[string]string{}, CAInjector: caInjector}
	configs, err := listConfigurations(ctx, c)
	if err != nil {
		return nil, cl, err
	}
	relevant := map[string]bool{}
	for _, cfg := range configs {
		for _, w := range cfg.Webhooks {
			if w.Service != nil {
				relevant[w.Service.Namespace] = true
			}
		}
	}
	certOf, err := listCertificates(ctx, c, relevant)
	if err != nil {
		return nil, cl, err
	}
	var nss corev1.NamespaceList
	if err := c.List(ctx, &nss); err != nil {
		return nil, cl, fmt.Errorf("list namespaces: %w", err)
	}
	for _, ns := range nss.Items {
		cl.Namespaces[ns.Name] = ns.Labels
	}
	if err := listServices(ctx, c, relevant, cl.Services); err != nil {
		return nil, cl, err
	}
	if cl.Workloads, err = listWorkloads(ctx, c, relevant); err != nil {
		return nil, cl, err
	}
	if cl.Sources, err = listSources(ctx, c, relevant, certOf); err != nil {
		return nil, cl, err
	}
	return configs, cl, nil
}

// listCertificates maps each cert-manager Certificate's Secret
// ("namespace/name") to the Certificate, and marks their namespaces
// relevant. A cluster without cert-manager has no such kind; that is not
// an error.
func listCertificates(ctx context.Context, c client.Reader, relevant map[string]bool) (map[string]string, error) {
	certOf := map[string]string{}
	var certs cmapi.CertificateList
	if err := c.List(ctx, &certs); err != nil && !meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("list cert-manager Certificates: %w", err)
	}
	for _, crt := range certs.Items {
		certOf[crt.Namespace+"/"+crt.Spec.SecretName] = crt.Name
		relevant[crt.Namespace] = true
	}
	return certOf, nil
}

// listServices fills services with the Services of the relevant
// namespaces and their ready endpoints (endpointslices.Count). Every slice
// of the Service counts, hand-made ones included, where the guard's prober
// dials only the endpointslice controller's: the count says whether
// kube-apiserver's calls reach a ready endpoint, and kube-proxy and
// kube-apiserver's endpoint resolver route to any slice labelled with the
// Service, whoever wrote it.
func listServices(ctx context.Context, c client.Reader, relevant map[string]bool, services map[string]Service) error {
	var svcs corev1.ServiceList
	if err := c.List(ctx, &svcs); err != nil {
		return fmt.Errorf("list services: %w", err)
	}
	for _, s := range svcs.Items {
		if relevant[s.Namespace] {
			services[s.Namespace+"/"+s.Name] = Service{Namespace: s.Namespace, Name: s.Name, Selector: s.Spec.Selector}
		}
	}
	var eps discoveryv1.EndpointSliceList
	if err := c.List(ctx, &eps); err != nil {
		return fmt.Errorf("list endpointslices: %w", err)
	}
	ready := map[string]*endpointslices.Count{}
	for i := range eps.Items {
		es := &eps.Items[i]
		key := es.Namespace + "/" + endpointslices.ServiceName(es)
		if _, ok := services[key]; !ok {
			continue
		}
		if ready[key] == nil {
			ready[key] = &endpointslices.Count{}
		}
		ready[key].Add(es.AddressType, endpointslices.ReadyCount(es))
	}
	for key, n := range ready {
		svc := services[key]
		svc.ReadyEndpoints = n.Total()
		services[key] = svc
	}
	return nil
}

// listSources are the PEM keys of the Secrets and ConfigMaps of the
// relevant namespaces.
func listSources(ctx context.Context, c client.Reader, relevant map[string]bool, certOf map[string]string) ([]Source, error) {
	var out []Source
	var secrets corev1.SecretList
	if err := c.List(ctx, &secrets); err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	for _, s := range secrets.Items {
		if relevant[s.Namespace] {
			out = append(out, pemSources(SourceSecret, s.Namespace, s.Name, s.Data, certOf[s.Namespace+"/"+s.Name])...)
		}
	}
	var cms corev1.ConfigMapList
	if err := c.List(ctx, &cms); err != nil {
		return nil, fmt.Errorf("list configmaps: %w", err)
	}
	for _, cm := range cms.Items {
		if !relevant[cm.Namespace] {
			continue
		}
		data := map[string][]byte{}
		for k, v := range cm.Data {
			data[k] = []byte(v)
		}
		maps.Copy(data, cm.BinaryData)
		out = append(out, pemSources(SourceConfigMap, cm.Namespace, cm.Name, data, "")...)
	}
	return out, nil
}

// pemSources are the keys of a Secret or ConfigMap that hold a PEM
// certificate, sorted by key.
func pemSources(kind SourceKind, ns, name string, data map[string][]byte, certificate string) []Source {
	var out []Source
	for k, v := range data {
		if _, err := cabundle.Parse(v); err == nil {
			out = append(out, Source{Kind: kind, Namespace: ns, Name: name, Key: k, PEM: v, Certificate: certificate})
		}
	}
	slices.SortFunc(out, func(a, b Source) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

// webhookEvidence is the part of one webhooks[] entry discovery reads;
// the two kinds of webhook share these fields.
func webhookEvidence(name string, cc admv1.WebhookClientConfig, fp *admv1.FailurePolicyType, se *admv1.SideEffectClass, timeout *int32, nsSel *metav1.LabelSelector, rules []admv1.RuleWithOperations, matchConditions int) Webhook {
	w := Webhook{Name: name, CABundle: cc.CABundle, FailurePolicy: fp, SideEffects: se, TimeoutSeconds: timeout, NamespaceSelector: nsSel, Rules: rules, MatchConditions: matchConditions}
	if cc.Service != nil {
		w.Service = &ServiceRef{Namespace: cc.Service.Namespace, Name: cc.Service.Name}
	}
	if cc.URL != nil {
		w.URL = *cc.URL
	}
	return w
}

func listWorkloads(ctx context.Context, c client.Reader, relevant map[string]bool) ([]Workload, error) {
	var out []Workload
	add := func(kind string, ns, name string, tpl corev1.PodTemplateSpec) {
		if !relevant[ns] {
			return
		}
		w := Workload{Kind: kind, Namespace: ns, Name: name, TemplateLabels: tpl.Labels, ServiceAccount: tpl.Spec.ServiceAccountName}
		if w.ServiceAccount == "" {
			w.ServiceAccount = "default"
		}
		for _, v := range tpl.Spec.Volumes {
			switch {
			case v.Secret != nil:
				w.Secrets = append(w.Secrets, v.Secret.SecretName)
			case v.ConfigMap != nil:
				w.ConfigMaps = append(w.ConfigMaps, v.ConfigMap.Name)
			case v.Projected != nil:
				for _, s := range v.Projected.Sources {
					if s.Secret != nil {
						w.Secrets = append(w.Secrets, s.Secret.Name)
					}
					if s.ConfigMap != nil {
						w.ConfigMaps = append(w.ConfigMaps, s.ConfigMap.Name)
					}
				}
			}
		}
		out = append(out, w)
	}
	var deps appsv1.DeploymentList
	if err := c.List(ctx, &deps); err != nil {
		return nil, fmt.Errorf("list deployments: %w", err)
	}
	for _, d := range deps.Items {
		add("Deployment", d.Namespace, d.Name, d.Spec.Template)
	}
	var sts appsv1.StatefulSetList
	if err := c.List(ctx, &sts); err != nil {
		return nil, fmt.Errorf("list statefulsets: %w", err)
	}
	for _, s := range sts.Items {
		add("StatefulSet", s.Namespace, s.Name, s.Spec.Template)
	}
	var dss appsv1.DaemonSetList
	if err := c.List(ctx, &dss); err != nil {
		return nil, fmt.Errorf("list daemonsets: %w", err)
	}
	for _, d := range dss.Items {
		add("DaemonSet", d.Namespace, d.Name, d.Spec.Template)
	}
	return out, nil
}

// listConfigurations reads both kinds of webhook configuration, and the
// CRDs and APIServices with an entry whose caBundle kube-apiserver trusts.
func listConfigurations(ctx context.Context, c client.Reader) ([]Configuration, error) {
	var vs admv1.ValidatingWebhookConfigurationList
	if err := c.List(ctx, &vs); err != nil {
		return nil, fmt.Errorf("list validatingwebhookconfigurations: %w", err)
	}
	var ms admv1.MutatingWebhookConfigurationList
	if err := c.List(ctx, &ms); err != nil {
		return nil, fmt.Errorf("list mutatingwebhookconfigurations: %w", err)
	}
	var out []Configuration
	for i := range vs.Items {
		v := &vs.Items[i]
		out = append(out, configuration(policy.KindValidating, &v.ObjectMeta, v.Webhooks, func(w *admv1.ValidatingWebhook) Webhook {
			return webhookEvidence(w.Name, w.ClientConfig, w.FailurePolicy, w.SideEffects, w.TimeoutSeconds, w.NamespaceSelector, w.Rules, len(w.MatchConditions))
		}))
	}
	for i := range ms.Items {
		m := &ms.Items[i]
		out = append(out, configuration(policy.KindMutating, &m.ObjectMeta, m.Webhooks, func(w *admv1.MutatingWebhook) Webhook {
			return webhookEvidence(w.Name, w.ClientConfig, w.FailurePolicy, w.SideEffects, w.TimeoutSeconds, w.NamespaceSelector, w.Rules, len(w.MatchConditions))
		}))
	}
	trust, _, err := ListTrustObjects(ctx, c)
	if err != nil {
		return nil, err
	}
	for _, o := range trust {
		out = append(out, trustConfiguration(o))
	}
	return out, nil
}

// configuration is one configuration of either kind: the two kinds' webhook
// types differ only in fields discover does not read, so evidence reads one
// webhook and the rest is shared.
func configuration[W any](kind policy.GuardedKind, meta *metav1.ObjectMeta, webhooks []W, evidence func(*W) Webhook) Configuration {
	cfg := Configuration{Kind: kind, Name: meta.Name, Annotations: meta.Annotations, CABundleManagers: CABundleManagers(meta.ManagedFields)}
	for i := range webhooks {
		cfg.Webhooks = append(cfg.Webhooks, evidence(&webhooks[i]))
	}
	return cfg
}
