package rcaextension

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/extension"

	"github.com/loom-otel/loom/extension/rcaextension/internal/metadata"
)

// DefaultEndpoint is loopback: the page shows request data, so it is not
// served beyond this host unless the config says so.
const DefaultEndpoint = "127.0.0.1:4320"

// NewFactory returns the rca extension's factory.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, createExtension, metadata.ExtensionStability)
}

func createDefaultConfig() component.Config {
	server := confighttp.NewDefaultServerConfig()
	server.NetAddr.Endpoint = DefaultEndpoint
	return &Config{
		Server:      server,
		Graph:       component.MustNewID("eventgraph"),
		Sampler:     component.MustNewID("reqsampling"),
		Window:      15 * time.Minute,
		MaxWindow:   24 * time.Hour,
		MaxRequests: 200,
		RootCause:   RootCauseConfig{MaxEvents: 1_000_000, InputHashPrefix: 2},
	}
}

func createExtension(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return newExtension(cfg.(*Config), set), nil
}
