module github.com/energyflow/edge

go 1.26.8

require (
	github.com/coreos/go-systemd/v22 v22.5.0
	github.com/goburrow/modbus v0.1.0
	github.com/mitchellh/go-homedir v1.1.0
	github.com/pion/webrtc/v3 v3.3.6
	github.com/prometheus/client_golang v1.20.5
	github.com/yalue/onnxruntime_go v1.27.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/NVIDIA/go-nvml v0.13.0-1 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/blackjack/webcam v0.6.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/goburrow/serial v0.1.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/klauspost/compress v1.17.9 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/pion/datachannel v1.5.8 // indirect
	github.com/pion/dtls/v2 v2.2.12 // indirect
	github.com/pion/ice/v2 v2.3.38 // indirect
	github.com/pion/interceptor v0.1.29 // indirect
	github.com/pion/logging v0.2.2 // indirect
	github.com/pion/mdns v0.0.12 // indirect
	github.com/pion/randutil v0.1.0 // indirect
	github.com/pion/rtcp v1.2.14 // indirect
	github.com/pion/rtp v1.10.6 // indirect
	github.com/pion/sctp v1.8.19 // indirect
	github.com/pion/sdp/v3 v3.0.9 // indirect
	github.com/pion/srtp/v2 v2.0.20 // indirect
	github.com/pion/stun v0.6.1 // indirect
	github.com/pion/transport/v2 v2.2.10 // indirect
	github.com/pion/turn/v2 v2.1.6 // indirect
	github.com/prometheus/client_model v0.6.1 // indirect
	github.com/prometheus/common v0.55.0 // indirect
	github.com/prometheus/procfs v0.15.1 // indirect
	github.com/simonvetter/modbus v1.6.3 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	github.com/wlynxg/anet v0.0.3 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/crypto v0.24.0 // indirect
	golang.org/x/net v0.26.0 // indirect
	golang.org/x/sys v0.22.0 // indirect
	google.golang.org/protobuf v1.34.2 // indirect
)
