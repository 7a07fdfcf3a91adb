package cmdutil

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/webhook"
)

// KubeFlags are kubectl's own cluster flags (cli-runtime's ConfigFlags:
// --kubeconfig, --context, -n, --as, --as-group, --server, --token,
// --request-timeout, ...), so every command that reaches a cluster,
// serve included, takes exactly what kubectl takes, KUBECONFIG included.
// Without a kubeconfig, inside a pod, client-go's loader falls back to the
// in-cluster configuration.
type KubeFlags struct {
	flags *genericclioptions.ConfigFlags
}

// NewKubeFlags returns the flags, not yet added to a flag set.
func NewKubeFlags() *KubeFlags {
	return &KubeFlags{flags: genericclioptions.NewConfigFlags(true)}
}

// AddFlags adds the flags to fs.
func (k *KubeFlags) AddFlags(fs *pflag.FlagSet) {
	k.flags.AddFlags(fs)
}

// RESTConfig is the client configuration the flags select.
func (k *KubeFlags) RESTConfig() (*rest.Config, error) {
	cfg, err := k.flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}

// Namespace is -n, else the kubeconfig context's namespace, else def.
func (k *KubeFlags) Namespace(def string) (string, error) {
	ns, explicit, err := k.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("kubeconfig: %w", err)
	}
	if !explicit && ns == "default" {
		return def, nil
	}
	return ns, nil
}

// Client is a controller-runtime client with the guard's scheme.
func (k *KubeFlags) Client() (client.Client, error) {
	cfg, err := k.RESTConfig()
	if err != nil {
		return nil, err
	}
	scheme, err := webhook.NewScheme()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// CompleteClient sets *c to a client of the flags unless a test set one;
// an unusable kubeconfig is invalid input.
func (k *KubeFlags) CompleteClient(c *client.Client) error {
	if *c != nil {
		return nil
	}
	cl, err := k.Client()
	if err != nil {
		return Invalid("%v", err)
	}
	*c = cl
	return nil
}
