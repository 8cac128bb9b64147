# Portico's controller image: the static portico binary on distroless, run
# as a non-root user. `make image` builds it (needs a Docker engine):
#
#   docker build --build-arg VERSION=v0.1.0 -t ghcr.io/portico-dev/portico:v0.1.0 .
#
# The binary is built by `make build-static`, which works without Docker.
# No Docker engine runs where Portico is developed and tested: this file
# has not been built there.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
COPY Makefile ./
ARG VERSION=dev
RUN make build-static VERSION=${VERSION} STATIC_BIN=/out/portico

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/portico /portico
USER 65532:65532
ENTRYPOINT ["/portico"]
