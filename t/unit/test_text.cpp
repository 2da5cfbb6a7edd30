#include <catch2/catch.hpp>

#include "core/byte_size.hpp"
#include "core/io_data.hpp"
#include "core/text.hpp"
#include "core/text_file.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

using namespace banyan;

TEST_CASE("replace_all replaces left to right without rescanning", "[text]") {
    CHECK(replace_all("out.{{id}}.{{id}}", "{{id}}", "f7") == "out.f7.f7");
    CHECK(replace_all("aaa", "a", "aa") == "aaaaaa");
    CHECK(replace_all("none", "{{x}}", "y") == "none");
}

TEST_CASE("utf8_complete_length holds back only a cut character", "[text]") {
    CHECK(utf8_complete_length("") == 0);
    CHECK(utf8_complete_length("plain") == 5);
    CHECK(utf8_complete_length("é") == 2);               // C3 A9: whole
    CHECK(utf8_complete_length("a\xC3") == 1);           // é's first byte
    CHECK(utf8_complete_length("a\xE2\x82") == 1);       // € cut after 2 of 3
    CHECK(utf8_complete_length("a\xE2\x82\xAC") == 4);   // € whole
    CHECK(utf8_complete_length("\xF0\x9F\x98") == 0);    // 😀 cut after 3 of 4
    CHECK(utf8_complete_length("\xF0\x9F\x98\x80") == 4);
    // Invalid bytes pass: nothing would ever complete them.
    CHECK(utf8_complete_length("a\xFF") == 2);
    CHECK(utf8_complete_length("a\x80\x80\x80\x80") == 5);
}

TEST_CASE("is_valid_utf8 follows RFC 3629", "[text]") {
    CHECK(is_valid_utf8(""));
    CHECK(is_valid_utf8(std::string("a\0b", 3)));
    CHECK(is_valid_utf8("é € 😀"));
    CHECK(!is_valid_utf8("\xC3"));              // cut short
    CHECK(!is_valid_utf8("\xC0\xAF"));          // overlong '/'
    CHECK(!is_valid_utf8("\xE0\x80\xAF"));      // overlong, 3 bytes
    CHECK(!is_valid_utf8("\xED\xA0\x80"));      // a surrogate
    CHECK(!is_valid_utf8("\xF4\x90\x80\x80"));  // past U+10FFFF
    CHECK(!is_valid_utf8("\xFF"));
    CHECK(!is_valid_utf8("a\x80"));             // a lone continuation byte
}

TEST_CASE("task I/O: text as it is, anything else in base64", "[text]") {
    nlohmann::json text;
    put_io_data(text, "héllo\n");
    CHECK(text == nlohmann::json{{"data", "héllo\n"}});
    CHECK(io_data(text, "output").value() == "héllo\n");

    std::string bytes("\xFF\x00\xC3", 3);
    nlohmann::json binary;
    put_io_data(binary, bytes);
    CHECK(binary["encoding"] == "base64");
    CHECK(io_data(binary, "output").value() == bytes);
    // What the JSON codec writes and reads back stays the same bytes.
    CHECK(io_data(nlohmann::json::parse(binary.dump()), "output").value() == bytes);

    CHECK(io_data(nlohmann::json{{"data", 5}}, "input").error().message == "input.data: expected a string");
    CHECK(io_data(nlohmann::json{{"data", "x"}, {"encoding", "hex"}}, "input").error().message ==
          "input.encoding: expected base64");
    CHECK(!io_data(nlohmann::json{{"data", "!!"}, {"encoding", "base64"}}, "input").ok());
}

TEST_CASE("byte sizes: units are powers of 1024, a bare number only where allowed", "[text][byte_size]") {
    CHECK(parse_byte_size("512M", BareSize::refused).value() == 512ull << 20);
    CHECK(parse_byte_size("4g", BareSize::refused).value() == 4ull << 30);
    CHECK(parse_byte_size("4GiB", BareSize::refused).value() == 4ull << 30);
    CHECK(parse_byte_size("4GB", BareSize::refused).value() == 4ull << 30);
    CHECK(parse_byte_size("1.5T", BareSize::refused).value() == 3ull << 39);
    CHECK(parse_byte_size("0.001K", BareSize::refused).value() == 2);  // rounded up to a byte
    CHECK(parse_byte_size("4096", BareSize::bytes).value() == 4096);
    auto fails = [](std::string_view text, BareSize bare, std::string_view why) {
        auto r = parse_byte_size(text, bare);
        INFO(text);
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().message.find(why) != std::string::npos);
    };
    fails("4096", BareSize::refused, "'4096': a size needs a unit");
    fails("", BareSize::bytes, "expected a size");
    fails("G", BareSize::refused, "expected a size");
    fails("4X", BareSize::refused, "unknown unit");
    fails("4 G", BareSize::refused, "unknown unit");
    fails("-4G", BareSize::refused, "expected a size");
    fails("0G", BareSize::refused, "more than 0");
    fails("1.2345G", BareSize::refused, "at most 3 decimals");
    fails("2E", BareSize::refused, "unknown unit");
    fails("2000P", BareSize::refused, "over the largest size, 1 EiB");
    fails("99999999999999999999999", BareSize::bytes, "over the largest size");
    CHECK(parse_byte_size("1025", BareSize::bytes, 1024).error().message == "'1025': over the largest size, 1 KiB");
}

TEST_CASE("byte sizes read back: the largest unit, a limit never shown below itself", "[text][byte_size]") {
    CHECK(format_byte_size(100) == "100 B");
    CHECK(format_byte_size(64ull << 20) == "64 MiB");
    CHECK(format_byte_size(3ull << 29) == "1.5 GiB");
    CHECK(format_byte_size((1ull << 30) + 1) == "1.1 GiB");
    CHECK(format_byte_size(uint64_t{1} << 60) == "1 EiB");
    CHECK(bytes_per_unit("MiB") == 1ull << 20);
    CHECK(bytes_per_unit("GB") == 1ull << 30);
    CHECK(bytes_per_unit("KW") == 0);
    CHECK(bytes_per_unit("") == 0);
}

TEST_CASE("read_pid_list reads the ids a kernel file lists, none when it is gone", "[text]") {
    auto path = std::filesystem::temp_directory_path() / ("banyan-unit-pids-" + std::to_string(getpid()));
    std::ofstream(path) << "12\n345\n6\n";
    CHECK(read_pid_list(path.string()) == std::vector<pid_t>{12, 345, 6});
    std::ofstream(path) << "7 8";  // (a task's children: one line, spaces)
    CHECK(read_pid_list(path.string()) == std::vector<pid_t>{7, 8});
    std::filesystem::remove(path);
    CHECK(read_pid_list(path.string()).empty());
    CHECK(read_pid_list("/proc/self/task/" + std::to_string(getpid()) + "/children").empty());
}
