package main

import (
	"context"
	"errors"

	kyvernoinformer "github.com/kyverno/kyverno/pkg/client/informers/externalversions"
	"github.com/kyverno/kyverno/pkg/config"
	genericwebhookcontroller "github.com/kyverno/kyverno/pkg/controllers/generic/webhook"
	webhookcontroller "github.com/kyverno/kyverno/pkg/controllers/webhook"
	runtimeutils "github.com/kyverno/kyverno/pkg/utils/runtime"
	admv1 "k8s.io/api/admissionregistration/v1"
	kubeinformers "k8s.io/client-go/informers"
	appsv1informers "k8s.io/client-go/informers/apps/v1"
	corev1informers "k8s.io/client-go/informers/core/v1"
)

// factories are cmd/kyverno's three informer factories: cluster-wide,
// Kyverno's namespace, Kyverno's resources.
type factories struct {
	kube, kubeKyverno kubeinformers.SharedInformerFactory
	kyverno           kyvernoinformer.SharedInformerFactory
}

// webhookControllers are the controllers createrLeaderControllers creates
// that write webhook configurations, with its arguments: the webhook
// controller (no server IP: in-cluster, Service references) and the
// exception, CEL exception and global context entry controllers.
func webhookControllers(o options, c clients, cfg config.Configuration, f factories,
	caInformer corev1informers.SecretInformer, deploymentInformer appsv1informers.DeploymentInformer,
	runtime runtimeutils.Runtime,
) []namedController {
	vwcs := c.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	vwcInformer := f.kube.Admissionregistration().V1().ValidatingWebhookConfigurations()
	port := int32(o.servicePort)
	pol := f.kyverno.Policies().V1beta1()
	webhook := webhookcontroller.NewController(
		c.dyn.Discovery(),
		c.kube.AdmissionregistrationV1().MutatingWebhookConfigurations(),
		vwcs,
		c.kube.CoordinationV1().Leases(config.KyvernoNamespace()),
		c.kyverno,
		f.kube.Admissionregistration().V1().MutatingWebhookConfigurations(),
		vwcInformer,
		f.kyverno.Kyverno().V1().ClusterPolicies(),
		f.kyverno.Kyverno().V1().Policies(),
		pol.ValidatingPolicies(), pol.NamespacedValidatingPolicies(),
		pol.GeneratingPolicies(), pol.NamespacedGeneratingPolicies(),
		pol.ImageValidatingPolicies(), pol.NamespacedImageValidatingPolicies(),
		pol.MutatingPolicies(), pol.NamespacedMutatingPolicies(),
		deploymentInformer,
		caInformer,
		f.kubeKyverno.Coordination().V1().Leases(),
		f.kube.Rbac().V1().ClusterRoles(),
		"",
		int32(o.webhookTimeout),
		port,
		o.autoUpdateWebhooks,
		false, // excludeBootstrapResources: cmd/kyverno's default
		true,  // admissionReports: cmd/kyverno's default
		runtime,
		cfg,
		o.caSecretName,
		// No state notifications: nothing here reads them (cmd/kyverno's
		// policy status controller does), and an unread channel would block.
		webhookcontroller.NewStateRecorder(nil),
	)
	generic := func(name, webhookName, path string, rule admv1.Rule) namedController {
		return namedController{name, 1, genericwebhookcontroller.NewController(
			name, vwcs, vwcInformer, caInformer, webhookName, path, "", port, nil,
			[]admv1.RuleWithOperations{{
				Rule:       rule,
				Operations: []admv1.OperationType{admv1.Create, admv1.Update},
			}},
			genericwebhookcontroller.Fail, genericwebhookcontroller.None, cfg, o.caSecretName,
		)}
	}
	return []namedController{
		{webhookcontroller.ControllerName, webhookcontroller.Workers, webhook},
		generic("exception-webhook-controller", config.ExceptionValidatingWebhookConfigurationName, config.ExceptionValidatingWebhookServicePath,
			admv1.Rule{APIGroups: []string{"kyverno.io"}, APIVersions: []string{"v2alpha1", "v2beta1"}, Resources: []string{"policyexceptions"}}),
		generic("celexception-webhook-controller", config.CELExceptionValidatingWebhookConfigurationName, config.CELExceptionValidatingWebhookServicePath,
			admv1.Rule{APIGroups: []string{"policies.kyverno.io"}, APIVersions: []string{"v1alpha1", "v1beta1", "v1"}, Resources: []string{"policyexceptions"}}),
		generic("global-context-webhook-controller", config.GlobalContextValidatingWebhookConfigurationName, config.GlobalContextValidatingWebhookServicePath,
			admv1.Rule{APIGroups: []string{"kyverno.io"}, APIVersions: []string{"v2alpha1"}, Resources: []string{"globalcontextentries"}}),
	}
}

// waitForCacheSync waits for every informer the controllers asked the
// factories for, as cmd/internal's WaitForCacheSync.
func waitForCacheSync(ctx context.Context, kube, kubeKyverno kubeinformers.SharedInformerFactory, kyverno kyvernoinformer.SharedInformerFactory) error {
	ok := true
	for _, synced := range kube.WaitForCacheSync(ctx.Done()) {
		ok = ok && synced
	}
	for _, synced := range kubeKyverno.WaitForCacheSync(ctx.Done()) {
		ok = ok && synced
	}
	for _, synced := range kyverno.WaitForCacheSync(ctx.Done()) {
		ok = ok && synced
	}
	if !ok {
		return errors.New("failed to wait for the informers' cache sync")
	}
	return nil
}
