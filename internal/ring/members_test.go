package ring

import (
	"context"
	"slices"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/loom-otel/loom/internal/ring/ringtest"
)

func TestStaticReportsItsMembersOnce(t *testing.T) {
	var got [][]string
	s := Static{"b:1", "a:1"}
	if err := s.Start(context.Background(), func(m []string) { got = append(got, m) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !slices.Equal(got[0], []string{"b:1", "a:1"}) {
		t.Fatalf("reported %v", got)
	}
}

// The members are what contrib's k8s resolver hands its ring: the ready
// addresses (a missing condition is ready) on every port, sorted, once each.
func TestReadyMembersAreTheReadyAddressesOnEveryPort(t *testing.T) {
	ready, notReady := true, false
	objects := []any{
		&discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}},
			{Addresses: []string{"10.0.0.3"}, Conditions: discoveryv1.EndpointConditions{Ready: &notReady}},
			{Addresses: []string{"10.0.0.1"}},
		}},
		&discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.2"}}, // in two slices while a slice is rewritten
			{Addresses: []string{"fd00::4"}},
		}},
	}
	got := readyMembers(objects, []int32{4317, 4318})
	want := []string{"10.0.0.1:4317", "10.0.0.1:4318", "10.0.0.2:4317", "10.0.0.2:4318", "[fd00::4]:4317", "[fd00::4]:4318"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// The resolver follows a Service's ready addresses through the API that
// $KUBECONFIG names, as contrib's k8s resolver does.
func TestEndpointSlicesFollowTheServicesReadyAddresses(t *testing.T) {
	api := ringtest.StartEndpointSliceAPI(t, "loom-gateway", "loom", 4317)
	api.SetReady("10.0.0.2", "10.0.0.1")
	t.Setenv("KUBECONFIG", api.Kubeconfig(t))
	for _, service := range []string{"loom-gateway.loom", "loom-gateway"} { // unqualified: the kubeconfig's namespace
		t.Run(service, func(t *testing.T) {
			reports := make(chan []string, 16)
			e := &EndpointSlices{Service: service, Ports: []int32{4317}}
			if err := e.Start(context.Background(), func(m []string) { reports <- m }); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = e.Shutdown(context.Background()) }()
			awaitMembers(t, reports, "10.0.0.1:4317", "10.0.0.2:4317")
			api.SetReady("10.0.0.3")
			awaitMembers(t, reports, "10.0.0.3:4317")
			api.SetReady("10.0.0.2", "10.0.0.1")
		})
	}
}

// awaitMembers waits for the resolver to report want.
func awaitMembers(t *testing.T, reports <-chan []string, want ...string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	var last []string
	for {
		select {
		case last = <-reports:
			if slices.Equal(last, want) {
				return
			}
		case <-timeout:
			t.Fatalf("members %v, want %v", last, want)
		}
	}
}
