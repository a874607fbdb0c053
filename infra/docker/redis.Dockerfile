# Redis for specdec's topology without a registry: Debian's redis-server on the
# locally made base image (infra/docker/build-base). compose.yaml's default is the
# public redis image; `make test-compose` runs this one in its place, with the
# same command and the same infra/redis.conf mounted at the same path.
#
#   docker build -f infra/docker/redis.Dockerfile --build-arg BASE_IMAGE=TAG -t specdec-redis:TAG infra/docker
ARG BASE_IMAGE=specdec-base:latest
FROM ${BASE_IMAGE}

RUN apt-get update \
 && apt-get install -y --no-install-recommends redis-server redis-tools \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /data /usr/local/etc/redis \
 && chown redis:redis /data

# As in the public image: the working directory (`dir ./` in infra/redis.conf)
# is /data, where the append-only file's volume is mounted.
WORKDIR /data
VOLUME ["/data"]
USER redis
EXPOSE 6379
CMD ["redis-server", "/usr/local/etc/redis/redis.conf"]
