// Command echo-basic is the backend of the Gateway API conformance suite.
// Its environment chooses what it serves:
//
//   - GRPC_ECHO_SERVER set: the gRPC echo service (package grpc);
//   - otherwise TCP_ECHO_SERVER set: the TCP echo protocol (package
//     tcpserver);
//   - otherwise UDP_ECHO_SERVER set: the UDP echo (package udpechoserver);
//   - otherwise the HTTP echo server (package httpserver).
//
// It runs until SIGTERM or SIGINT. Portico wrote this command; it keeps the
// environment variables, ports and wire contract of the upstream
// sigs.k8s.io/gateway-api-conformance-images echo-basic image.
package main

import (
	"os"

	"sigs.k8s.io/gateway-api-conformance-images/echo-basic/grpc"
	"sigs.k8s.io/gateway-api-conformance-images/echo-basic/httpserver"
	"sigs.k8s.io/gateway-api-conformance-images/echo-basic/tcpserver"
	"sigs.k8s.io/gateway-api-conformance-images/echo-basic/udpechoserver"
)

func main() {
	switch {
	case os.Getenv("GRPC_ECHO_SERVER") != "":
		grpc.Main()
	case os.Getenv("TCP_ECHO_SERVER") != "":
		tcpserver.Main()
	case os.Getenv("UDP_ECHO_SERVER") != "":
		udpechoserver.Main()
	default:
		httpserver.Main()
	}
}
