package ring

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	discoveryclient "k8s.io/client-go/kubernetes/typed/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// Resolver follows the members of a ring as they change.
type Resolver interface {
	// Start reports the members, then every change of them, to onChange,
	// one call at a time, until Shutdown.
	Start(ctx context.Context, onChange func(members []string)) error
	Shutdown(ctx context.Context) error
}

// Static is a member set that never changes.
type Static []string

func (s Static) Start(_ context.Context, onChange func([]string)) error {
	onChange(slices.Clone(s))
	return nil
}

func (Static) Shutdown(context.Context) error { return nil }

// EndpointSlices follows the ready addresses of a Kubernetes Service, each on
// each of ports, as contrib's load_balancing exporter does with its k8s
// resolver: the members it reports are the endpoints the agents route to.
type EndpointSlices struct {
	// Service is name.namespace, or name in the namespace of the kubeconfig
	// context ($KUBECONFIG) or of the pod (in-cluster).
	Service string
	Ports   []int32

	stop chan struct{}
}

// Start lists and watches the Service's EndpointSlices, with the
// kubeconfig of $KUBECONFIG (or ~/.kube/config) when there is one, else
// the pod's service account; it returns once the first list is in.
func (e *EndpointSlices) Start(ctx context.Context, onChange func([]string)) error {
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return fmt.Errorf("kubernetes client configuration: %w", err)
	}
	name, namespace, qualified := strings.Cut(e.Service, ".")
	if !qualified {
		if namespace, _, err = loader.Namespace(); err != nil {
			return fmt.Errorf("namespace of service %q: %w", e.Service, err)
		}
	}
	client, err := discoveryclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	selector := discoveryv1.LabelServiceName + "=" + name
	slices := client.EndpointSlices(namespace)
	informer := cache.NewSharedInformer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return slices.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return slices.Watch(ctx, o)
		},
	}, &discoveryv1.EndpointSlice{}, 0)
	report := func() { onChange(readyMembers(informer.GetStore().List(), e.Ports)) }
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { report() },
		UpdateFunc: func(any, any) { report() },
		DeleteFunc: func(any) { report() },
	}); err != nil {
		return err
	}
	e.stop = make(chan struct{})
	go informer.Run(e.stop)
	// Waiting for the first list ends with the start's context too.
	waiting := make(chan struct{})
	defer close(waiting)
	abandon := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			close(abandon)
		case <-waiting:
		}
	}()
	if !cache.WaitForCacheSync(abandon, informer.HasSynced) {
		close(e.stop)
		e.stop = nil
		return errors.New("the EndpointSlices of service " + e.Service + " could not be listed before the start timed out")
	}
	return nil
}

func (e *EndpointSlices) Shutdown(context.Context) error {
	if e.stop != nil {
		close(e.stop)
	}
	return nil
}

// readyMembers are the addresses of the ready endpoints of the slices (a
// missing condition counts as ready, as the API says), each on each port.
func readyMembers(objects []any, ports []int32) []string {
	var members []string
	for _, o := range objects {
		slice, ok := o.(*discoveryv1.EndpointSlice)
		if !ok {
			continue
		}
		for _, ep := range slice.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, addr := range ep.Addresses {
				for _, port := range ports {
					members = append(members, net.JoinHostPort(addr, strconv.Itoa(int(port))))
				}
			}
		}
	}
	slices.Sort(members)
	return slices.Compact(members)
}
