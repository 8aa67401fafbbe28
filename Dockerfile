# syntax=docker/dockerfile:1
# One image for every Herald component: the subcommand (operator, ingress, webhook, worker, migrate) is the
# argument. Build: make docker-build (docker build -t <image> .).

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so source changes reuse the cached download layer.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# What `herald version` prints; make docker-build passes the checkout's `git describe`.
ARG VERSION=unknown
# A static binary: no cgo, no paths of the build machine, no symbol tables.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w -X main.buildVersion=${VERSION}" -o /out/herald ./cmd/herald

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/herald /herald
USER nonroot:nonroot
ENTRYPOINT ["/herald"]
