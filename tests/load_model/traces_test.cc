#include "load_model/traces.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "gtest/gtest.h"

namespace evoscale::load_model {
namespace {

constexpr char kBitbrains[] =
    "Timestamp [ms];\tCPU cores;\tCPU capacity provisioned [MHZ];\tCPU usage [MHZ];\tCPU usage "
    "[%];\tMemory capacity provisioned [KB];\tMemory usage [KB];\tDisk read throughput "
    "[KB/s];\tDisk write throughput [KB/s];\tNetwork received throughput [KB/s];\tNetwork "
    "transmitted throughput [KB/s]\n"
    "1372629804;\t2;\t5851.9989;\t87.7799835;\t1.5;\t8218624.0;\t1034592.8;\t160.8;\t21.7;\t0.2;\t1.4\n"
    "1372630104;\t2;\t5851.9989;\t29.2599945;\t0.5;\t8218624.0;\t458575.4;\t0.0;\t2.3;\t0.2;\t1.0\n"
    "1372630404;\t2;\t5851.9989\n"                                            // too few fields
    "1372630704;\t2;\t5851.9989;\tabc;\t0.4;\t8218624.0;\t78292.2;\t0;\t0;\t0;\t0\n"  // not a number
    "1372631004;\t0;\t5851.9989;\t23.4;\t0.4;\t8218624.0;\t78292.2;\t0;\t0;\t0;\t0\n"  // 0 cores
    "1372630000;\t2;\t5851.9989;\t23.4;\t0.4;\t8218624.0;\t78292.2;\t0;\t0;\t0;\t0\n"  // out of order
    "1372631304;\t2;\t5851.9989;\t23.4079956;\t0.4;\t8218624.0;\t78292.26;\t0;\t0;\t0;\t0\n";

TEST(BitbrainsTest, ParsesAndConvertsUnits) {
  const absl::StatusOr<VmTrace> vm = ParseBitbrainsVm(kBitbrains, "1");
  ASSERT_TRUE(vm.ok()) << vm.status();
  ASSERT_EQ(vm->samples.size(), 3u);
  EXPECT_EQ(vm->skipped_lines, 4);
  const VmSample& s = vm->samples[0];
  EXPECT_EQ(s.time, absl::FromUnixSeconds(1372629804));
  EXPECT_NEAR(s.cpu_cores, 87.7799835 / (5851.9989 / 2), 1e-12);  // 0.030 cores
  EXPECT_DOUBLE_EQ(s.cpu_capacity_cores, 2);
  EXPECT_DOUBLE_EQ(s.memory_bytes, 1034592.8 * 1024);
  EXPECT_DOUBLE_EQ(s.memory_capacity_bytes, 8218624.0 * 1024);
  EXPECT_EQ(vm->samples[2].time, absl::FromUnixSeconds(1372631304));
}

TEST(BitbrainsTest, NothingValidIsAnError) {
  const absl::StatusOr<VmTrace> vm = ParseBitbrainsVm("Timestamp [ms]\ngarbage\n", "x");
  EXPECT_EQ(vm.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(vm.status().message().find("\"x\""), std::string::npos);
}

TEST(BitbrainsTest, MissingPathIsNotFound) {
  EXPECT_EQ(ReadBitbrains("/nonexistent/bitbrains").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(AlibabaTest, ReadsColumnsByHeaderName) {
  const absl::StatusOr<PodValues> a = ParseAlibabaPodCsv(
      "value,timestamp_anon,container_ip\n50.0,60.0,pod-a\nbad,60.0,pod-b\n1,2\n", "duty");
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->rows.size(), 1u);
  EXPECT_EQ(a->skipped_lines, 2);
  EXPECT_EQ(a->rows[0].container_ip, "pod-a");
  EXPECT_DOUBLE_EQ(a->rows[0].value, 50.0);
  const absl::StatusOr<PodValues> b = ParseAlibabaPodCsv(
      "timestamp_anon,value,container_ip,request_type\n60.0,0.5,,API Requests\n", "qps");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->rows[0].container_ip, "");
  EXPECT_DOUBLE_EQ(b->rows[0].timestamp, 60.0);
  const absl::StatusOr<PodValues> c = ParseAlibabaPodCsv("time,val\n1,2\n", "x.csv");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("x.csv"), std::string::npos);
}

class AlibabaDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("lm_alibaba_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& content) {
    std::ofstream(dir_ / name) << content;
  }
  std::filesystem::path dir_;
};

TEST_F(AlibabaDirTest, JoinsPodsOnContainerIpAndTimestamp) {
  Write("pod_gpu_duty_cycle_anon.csv",
        "value,timestamp_anon,container_ip\n"
        "50,60,a\n30,60,b\n"
        "100,120,a\n0,120,b\n"
        "oops,120,c\n");
  Write("qps.csv",
        "timestamp_anon,value,container_ip,request_type\n"
        "60,0.5,a,Generative Requests\n"
        "60,0.25,,API Requests\n"
        "100,1.0,b,Generative Requests\n");  // between steps: goes to the step at 120
  Write("pod_gpu_memory_used_bytes_anon.csv",
        "timestamp_anon,value,container_ip\n60,1000,a\n60,2000,b\n");
  const absl::StatusOr<ReplicaTrace> t = ReadAlibabaGenAi(dir_.string());
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->steps.size(), 2u);
  EXPECT_EQ(t->skipped_lines, 1);
  EXPECT_EQ(t->steps[0].time, absl::FromUnixSeconds(60));
  EXPECT_EQ(t->steps[0].observed_replicas, 2);
  EXPECT_DOUBLE_EQ(t->steps[0].demand, 0.8);
  EXPECT_DOUBLE_EQ(t->steps[0].qps, 0.75);
  EXPECT_DOUBLE_EQ(t->steps[0].gpu_memory_bytes, 3000);
  EXPECT_DOUBLE_EQ(t->steps[1].demand, 1.0);
  EXPECT_DOUBLE_EQ(t->steps[1].qps, 1.0);
}

TEST_F(AlibabaDirTest, MissingDutyCycleIsNotFound) {
  const absl::StatusOr<ReplicaTrace> t = ReadAlibabaGenAi(dir_.string());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("pod_gpu_duty_cycle_anon.csv"), std::string::npos);
}

TEST(AzureLlmTest, BucketsArrivalsIntoSteps) {
  AzureLlmOptions o;
  o.prefill_tokens_per_s = 1000;
  o.decode_tokens_per_s = 100;
  const absl::StatusOr<ReplicaTrace> t = ParseAzureLlm(
      "TIMESTAMP,ContextTokens,GeneratedTokens\n"
      "2023-11-16 18:15:46.6805900,1000,100\n"
      "2023-11-16 18:15:50.9951690,2000,200\n"
      "not a time,1,1\n"
      "2023-11-16 18:17:01.0000000,600,60\n",
      o);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->skipped_lines, 1);
  ASSERT_EQ(t->steps.size(), 3u);  // 18:15, 18:16 (empty), 18:17.
  EXPECT_DOUBLE_EQ(t->steps[0].qps, 2.0 / 60);
  // (1000/1000 + 100/100) + (2000/1000 + 200/100) = 6 replica-seconds in 60 s.
  EXPECT_DOUBLE_EQ(t->steps[0].demand, 6.0 / 60);
  EXPECT_EQ(t->steps[1].qps, 0);
  EXPECT_DOUBLE_EQ(t->steps[2].demand, 1.2 / 60);
}

}  // namespace
}  // namespace evoscale::load_model
