"""The generated protobuf and gRPC modules of proto/evoscale/v1 (study_pb2, study_pb2_grpc,
autoscaler_pb2, autoscaler_pb2_grpc, admin_pb2, admin_pb2_grpc), written by setup.py at build
time."""
