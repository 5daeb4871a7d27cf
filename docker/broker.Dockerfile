# The broker image: the static bin/broker and a default server.properties, FROM
# scratch, so it builds with nothing pulled. Build it with scripts/images.sh (or
# `make images`), which builds bin/broker and passes a context holding only
# `broker` and `server.properties` (docker/server.properties).
#
#   docker run kafkazk/broker:latest --override broker.id=1 --override zookeeper.connect=zk:2181
#
# There is no shell in the image: configuration is the properties file plus
# `--override key=value` arguments (docker-compose.yml's `command:`).
FROM scratch
COPY broker /broker
COPY server.properties /etc/kafkazk/server.properties
# Data: log.dirs=/var/lib/kafkazk/data. Declared as a volume so that data
# outlives the container unless a named volume is given.
VOLUME ["/var/lib/kafkazk"]
EXPOSE 9092
ENV BROKER_LOG_LEVEL=info
ENTRYPOINT ["/broker", "/etc/kafkazk/server.properties"]
