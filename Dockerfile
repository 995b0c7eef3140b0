# conclave: a static binary on a minimal, non-root image.
# Build:  docker build -t conclave --build-arg VERSION=$(git describe --tags --always) \
#           --build-arg COMMIT=$(git rev-parse HEAD) .
# Run:    docker run -v $PWD/config.toml:/config/config.toml:ro \
#           -v $PWD/templates:/config/templates:ro \
#           -e SLACK_APP_TOKEN -e SLACK_BOT_TOKEN -e OPENAI_API_KEY conclave

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The build context has no .git (.dockerignore), so the version and commit
# that `conclave --version` prints are passed in.
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" -o /out/conclave ./cmd/conclave

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/conclave /usr/local/bin/conclave
# config.toml and templates/ are mounted here; both are optional.
WORKDIR /config
USER 65532:65532
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --retries=3 CMD ["/usr/local/bin/conclave", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/conclave"]
CMD ["run"]
