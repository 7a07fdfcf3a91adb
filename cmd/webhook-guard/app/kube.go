package app

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/webhook"
)

// kubeFlags are kubectl's own cluster flags (cli-runtime's ConfigFlags:
// --kubeconfig, --context, -n, --as, --as-group, --server, --token,
// --request-timeout, ...), so the commands that read a live cluster take
// exactly what kubectl takes, KUBECONFIG included.
type kubeFlags struct {
	flags *genericclioptions.ConfigFlags
}

func (k *kubeFlags) add(cmd *cobra.Command) {
	k.flags = genericclioptions.NewConfigFlags(true)
	k.flags.AddFlags(cmd.Flags())
}

func (k *kubeFlags) restConfig() (*rest.Config, error) {
	cfg, err := k.flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}

// namespace is -n, else the kubeconfig context's namespace, else def.
func (k *kubeFlags) namespace(def string) (string, error) {
	ns, explicit, err := k.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("kubeconfig: %w", err)
	}
	if !explicit && ns == "default" {
		return def, nil
	}
	return ns, nil
}

func (k *kubeFlags) client() (client.Client, error) {
	cfg, err := k.restConfig()
	if err != nil {
		return nil, err
	}
	scheme, err := webhook.NewScheme()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// validOutput checks -o for the commands printing findings.
func validOutput(o string) error {
	switch o {
	case "table", "json", "yaml":
		return nil
	}
	return invalid("--output must be table, json or yaml, got %q", o)
}

// printStructured prints v as JSON or YAML.
func printStructured(out io.Writer, format string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
	} else {
		b = append(b, '\n')
	}
	_, err = out.Write(b)
	return err
}
