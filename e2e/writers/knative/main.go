// Command knative-writer runs Knative's own webhook reconcilers
// (knative.dev/pkg, the version knative.dev/serving v0.50.0 requires),
// wired as knative.dev/serving's cmd/webhook wires them, with the
// conversion reconciler wired as knative.dev/eventing's cmd/webhook wires
// it:
//
//   - certificates.NewController keeps Secret webhook-certs in
//     $SYSTEM_NAMESPACE (server-key.pem, server-cert.pem, ca-cert.pem):
//     it generates a new CA and serving certificate (ECDSA, one week)
//     whenever a key is missing, the pair does not parse, or the serving
//     certificate expires within a day;
//   - the defaulting, validation and configmaps admission reconcilers
//     rewrite the webhooks[] entry named like their configuration
//     (webhook.serving.knative.dev, validation.webhook.serving.knative.dev,
//     config.webhook.serving.knative.dev): rules, namespaceSelector,
//     service path and caBundle = the Secret's ca-cert.pem, plus the
//     configuration's ownerReferences (a full UPDATE from the informer's
//     copy), on every event of the Secret or the configuration and on every
//     informer resync;
//   - the conversion reconciler writes ca-cert.pem into the conversion
//     webhook caBundle of the Widget CRD (--conversion-crd).
//
// All through sharedmain, as serving's main (WebhookMainWithConfig after
// the flag parsing WebhookMainWithContext would do, so that --resync is
// read first; --disable-ha, which only that one registers, is left out):
// its flags (--kubeconfig, ...), its environment (SYSTEM_NAMESPACE,
// WEBHOOK_NAME, WEBHOOK_PORT, PROFILING_PORT, CONFIG_LOGGING_NAME, ...), its
// leader election (on, as serving runs it: one Lease per reconciler in
// $SYSTEM_NAMESPACE; a single process wins every one at once), and its
// admission HTTPS server, which nothing calls here (the suite gives it a
// free WEBHOOK_PORT). The only additions are --grace-period (how long the
// admission server drains on SIGTERM; serving keeps Knative's default),
// --resync (the informers' resync
// period through controller.WithResyncPeriod, 10 hours in Knative, so a
// test sees several resyncs) and the Widget type the reconcilers are given.
//
// The e2e suite (e2e/framework/knative.go) runs it as
// system:serviceaccount:knative-serving:controller with serving's RBAC.
// Knative logs JSON lines on stdout.
package main

import (
	"context"
	"flag"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"knative.dev/pkg/configmap"
	"knative.dev/pkg/controller"
	"knative.dev/pkg/injection"
	"knative.dev/pkg/injection/sharedmain"
	"knative.dev/pkg/leaderelection"
	"knative.dev/pkg/logging"
	o11yconfigmap "knative.dev/pkg/observability/configmap"
	"knative.dev/pkg/signals"
	"knative.dev/pkg/webhook"
	"knative.dev/pkg/webhook/certificates"
	"knative.dev/pkg/webhook/configmaps"
	"knative.dev/pkg/webhook/resourcesemantics"
	"knative.dev/pkg/webhook/resourcesemantics/conversion"
	"knative.dev/pkg/webhook/resourcesemantics/defaulting"
	"knative.dev/pkg/webhook/resourcesemantics/validation"
)

// Serving's names for its three webhook configurations (and the entry
// each holds, of the same name).
const (
	defaultingName = "webhook.serving.knative.dev"
	validationName = "validation.webhook.serving.knative.dev"
	configMapsName = "config.webhook.serving.knative.dev"
)

var types = map[schema.GroupVersionKind]resourcesemantics.GenericCRD{
	widgetGVK(widgetHub): &Widget{},
}

func identity(ctx context.Context) context.Context { return ctx }

func newDefaultingAdmissionController(ctx context.Context, _ configmap.Watcher) *controller.Impl {
	return defaulting.NewAdmissionController(ctx, defaultingName, "/defaulting", types, identity, false)
}

func newValidationAdmissionController(ctx context.Context, _ configmap.Watcher) *controller.Impl {
	return validation.NewAdmissionController(ctx, validationName, "/resource-validation", types, identity, false)
}

// newConfigValidationController validates the ConfigMaps knative.dev/pkg
// itself defines (serving adds its own to the same list).
func newConfigValidationController(ctx context.Context, _ configmap.Watcher) *controller.Impl {
	return configmaps.NewAdmissionController(ctx, configMapsName, "/config-validation", configmap.Constructors{
		logging.ConfigMapName():        logging.NewConfigFromConfigMap,
		leaderelection.ConfigMapName(): leaderelection.NewConfigFromConfigMap,
		o11yconfigmap.Name():           o11yconfigmap.Parse,
	})
}

// newConversionController is eventing's wiring (path /resource-conversion)
// for the one CRD.
func newConversionController(crd string) func(context.Context, configmap.Watcher) *controller.Impl {
	return func(ctx context.Context, _ configmap.Watcher) *controller.Impl {
		zygotes := map[string]conversion.ConvertibleObject{}
		for _, v := range widgetVersions {
			zygotes[v] = &Widget{}
		}
		return conversion.NewConversionController(ctx, "/resource-conversion",
			map[schema.GroupKind]conversion.GroupKindConversion{
				widgetGVK(widgetHub).GroupKind(): {DefinitionName: crd, HubVersion: widgetHub, Zygotes: zygotes},
			}, identity)
	}
}

func main() {
	resync := flag.Duration("resync", 0, "The informers' resync period (controller.WithResyncPeriod); 0 keeps Knative's 10 hours.")
	crd := flag.String("conversion-crd", WidgetCRD, "The CRD whose conversion webhook caBundle the conversion reconciler keeps.")
	grace := flag.Duration("grace-period", 0, "webhook.Options.GracePeriod: how long the admission server drains on SIGTERM (0 keeps Knative's default).")
	// What sharedmain.WebhookMainWithContext does first (it parses the
	// flags, --kubeconfig and klog's included), done here so that --resync
	// is known before the informer factories read it from ctx.
	cfg := injection.ParseAndGetRESTConfigOrDie()

	ctx := webhook.WithOptions(signals.NewContext(), webhook.Options{
		ServiceName: webhook.NameFromEnv(),
		Port:        webhook.PortFromEnv(8443),
		SecretName:  "webhook-certs",
		GracePeriod: *grace,
	})
	ctx = sharedmain.WithHealthProbesDisabled(ctx)
	if *resync > 0 {
		ctx = controller.WithResyncPeriod(ctx, *resync)
	}
	sharedmain.WebhookMainWithConfig(ctx, "webhook", cfg,
		certificates.NewController,
		newDefaultingAdmissionController,
		newValidationAdmissionController,
		newConfigValidationController,
		newConversionController(*crd),
	)
}
