/** One raw CRI call through the embedded schema, for reading what the client does not keep. */
import * as grpc from "@grpc/grpc-js";
import {
  type CriApiVersion,
  criServices,
  type RuntimeMethod,
} from "../../lib/sources/cri_proto.ts";

export function criCall(
  endpoint: string,
  api: CriApiVersion,
  method: RuntimeMethod,
  request: unknown,
): Promise<unknown> {
  const definition = criServices()[api][method];
  const channel = new grpc.Client(endpoint, grpc.credentials.createInsecure());
  return new Promise<unknown>((resolve, reject) =>
    channel.makeUnaryRequest(
      definition.path,
      definition.requestSerialize,
      definition.responseDeserialize,
      request,
      new grpc.Metadata(),
      { deadline: Date.now() + 5_000 },
      (error, value) => error ? reject(error) : resolve(value),
    )
  ).finally(() => channel.close());
}
