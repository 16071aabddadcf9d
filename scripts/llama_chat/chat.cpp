// llama.cpp's chat layer (common/: the model's Jinja template with tools, a grammar and a parser per tool-call
// format, JSON schema to grammar) behind a C door of JSON strings, for models_app/llamacpp/chat.py.
//
// common/ is C++ with no C API, so ctypes cannot call it; this file is all the panel adds. Every function takes
// and gives JSON text, and catches every exception: a bad schema or template is an {"error": ...} answer, never
// an abort of the process that loaded it. Strings it returns are freed with cp_free.
//
// Built by scripts/build_llama.py into libclusterpanel-chat.so beside libllama and libllama-common.

#include "chat.h"
#include "common.h"
#include "json-schema-to-grammar.h"
#include "json.h"
#include "llama.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

namespace {

char * give(const std::string & text) {
    char * copy = static_cast<char *>(std::malloc(text.size() + 1));
    std::memcpy(copy, text.c_str(), text.size() + 1);
    return copy;
}

char * refuse(const char * what) {
    common_json answer = common_json::object();
    answer["error"] = std::string(what);
    return give(answer.dump());
}

common_json strings(const std::vector<std::string> & items) {
    common_json list = common_json::array();
    for (const auto & item : items) {
        list.push_back(item);
    }
    return list;
}

}  // namespace

extern "C" {

void cp_free(char * text) {
    std::free(text);
}

// {"grammar": GBNF} for a JSON schema (as llama-server's json_schema field), or {"error": why}.
char * cp_schema_grammar(const char * schema) {
    try {
        common_json answer = common_json::object();
        answer["grammar"] = json_schema_to_grammar(common_json::parse(schema));
        return give(answer.dump());
    } catch (const std::exception & e) {
        return refuse(e.what());
    }
}

// The model's chat templates (its own, or `override_template` when not empty); NULL if they do not compile.
void * cp_templates(const llama_model * model, const char * override_template) {
    try {
        return common_chat_templates_init(model, override_template ? override_template : "").release();
    } catch (const std::exception &) {
        return nullptr;
    }
}

void cp_templates_free(void * templates) {
    common_chat_templates_free(static_cast<common_chat_templates *>(templates));
}

// What the template can show: {"supports_tools": bool, "supports_tool_calls": bool, ...}.
char * cp_caps(void * templates) {
    try {
        common_json answer = common_json::object();
        for (const auto & [name, value] : common_chat_templates_get_caps(static_cast<common_chat_templates *>(templates))) {
            answer[name] = value;
        }
        return give(answer.dump());
    } catch (const std::exception & e) {
        return refuse(e.what());
    }
}

// The prompt and what generation needs for a chat: `request` holds OpenAI's messages, tools, tool_choice
// ("auto", "none", "required"), parallel_tool_calls and json_schema. The answer: prompt, grammar, grammar_lazy,
// grammar_triggers [{type, value, token}], preserved_tokens, additional_stops, generation_prompt, format and
// parser (what cp_parse needs), or {"error": why}.
char * cp_apply(void * templates, const char * request) {
    try {
        common_json body = common_json::parse(request);
        common_chat_templates_inputs inputs;
        inputs.messages = common_chat_msgs_parse_oaicompat(body.at("messages"));
        if (body.contains("tools") && !body.at("tools").is_null()) {
            inputs.tools = common_chat_tools_parse_oaicompat(body.at("tools"));
        }
        inputs.tool_choice = common_chat_tool_choice_parse_oaicompat(body.value("tool_choice", std::string("auto")));
        inputs.parallel_tool_calls = body.value("parallel_tool_calls", false);
        if (body.contains("json_schema") && !body.at("json_schema").is_null()) {
            inputs.json_schema = body.at("json_schema").dump();
        }
        inputs.use_jinja = true;
        inputs.add_generation_prompt = true;
        inputs.enable_thinking = body.value("enable_thinking", false);
        inputs.reasoning_format = COMMON_REASONING_FORMAT_AUTO;  // llama-server's default: thinking kept apart
        common_chat_params out = common_chat_templates_apply(static_cast<common_chat_templates *>(templates), inputs);

        common_json triggers = common_json::array();
        for (const auto & trigger : out.grammar_triggers) {
            common_json item = common_json::object();
            item["type"] = static_cast<int>(trigger.type);
            item["value"] = trigger.value;
            item["token"] = static_cast<int>(trigger.token);
            triggers.push_back(item);
        }
        common_json answer = common_json::object();
        answer["prompt"] = out.prompt;
        answer["grammar"] = out.grammar;
        answer["grammar_lazy"] = out.grammar_lazy;
        answer["grammar_triggers"] = triggers;
        answer["preserved_tokens"] = strings(out.preserved_tokens);
        answer["additional_stops"] = strings(out.additional_stops);
        answer["generation_prompt"] = out.generation_prompt;
        answer["format"] = static_cast<int>(out.format);
        answer["format_name"] = std::string(common_chat_format_name(out.format));
        answer["parser"] = out.parser;
        return give(answer.dump());
    } catch (const std::exception & e) {
        return refuse(e.what());
    }
}

// A grammar sampler as llama.cpp's common sampler makes one (lazy with its triggers; a grammar made for an output
// format or tool calls first fed the template's generation prompt), for the panel's own sampler chain. `spec`:
// grammar, kind ("user", "output_format" or "tool_calls"), lazy, triggers, generation_prompt. NULL if the grammar
// does not parse (llama.cpp logs why).
llama_sampler * cp_grammar_sampler(const llama_model * model, const char * spec) {
    try {
        common_json given = common_json::parse(spec);
        const llama_vocab * vocab = llama_model_get_vocab(model);
        const std::string grammar = given.value("grammar", std::string());
        const std::string kind = given.value("kind", std::string("user"));
        const bool lazy = given.value("lazy", false);
        std::vector<std::string> patterns;
        std::vector<llama_token> tokens;
        if (given.contains("triggers")) {
            const common_json & triggers = given.at("triggers");
            for (size_t i = 0; i < triggers.size(); ++i) {
                const common_json & trigger = triggers.at(i);
                const auto type = static_cast<common_grammar_trigger_type>(trigger.value("type", 0));
                const std::string value = trigger.value("value", std::string());
                switch (type) {
                    case COMMON_GRAMMAR_TRIGGER_TYPE_WORD:
                        patterns.push_back(regex_escape(value));
                        break;
                    case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN:
                        patterns.push_back(value);
                        break;
                    case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN_FULL:
                        patterns.push_back(value.empty() ? "^$" : (value.front() != '^' ? "^" : "") + value +
                                                                      (value.back() != '$' ? "$" : ""));
                        break;
                    case COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN:
                        tokens.push_back(static_cast<llama_token>(trigger.value("token", -1)));
                        break;
                }
            }
        }
        std::vector<const char *> patterns_c;
        for (const auto & pattern : patterns) {
            patterns_c.push_back(pattern.c_str());
        }
        llama_sampler * sampler = lazy ? llama_sampler_init_grammar_lazy_patterns(
                                             vocab, grammar.c_str(), "root", patterns_c.data(), patterns_c.size(),
                                             tokens.data(), tokens.size())
                                       : llama_sampler_init_grammar(vocab, grammar.c_str(), "root");
        const std::string prompt = given.value("generation_prompt", std::string());
        if (sampler && !lazy && kind != "user" && !prompt.empty()) {
            std::vector<llama_token> prefill = common_tokenize(vocab, prompt, false, true);
            for (size_t i = 0; i < prefill.size(); ++i) {
                std::string piece = common_token_to_piece(vocab, prefill[i], true);
                if (i == 0 && !piece.empty() && std::isspace(static_cast<unsigned char>(piece[0])) &&
                    !std::isspace(static_cast<unsigned char>(prompt[0]))) {
                    continue;  // a tokenizer's space before the first special token, as common/sampling.cpp skips
                }
                llama_sampler_accept(sampler, prefill[i]);
            }
        }
        return sampler;
    } catch (const std::exception &) {
        return nullptr;
    }
}

// The assistant message in `text` (generated after the prompt cp_apply made): {"content", "reasoning_content",
// "tool_calls": [{"name", "arguments", "id"}]}, or {"error": why}. `partial`: the text may still grow (streaming).
// `syntax`: format, parser and generation_prompt as cp_apply gave them.
char * cp_parse(const char * text, int partial, const char * syntax) {
    try {
        common_json given = common_json::parse(syntax);
        common_chat_parser_params params;
        params.format = static_cast<common_chat_format>(given.value("format", 0));
        params.generation_prompt = given.value("generation_prompt", std::string());
        params.parse_tool_calls = given.value("parse_tool_calls", true);
        params.reasoning_format = COMMON_REASONING_FORMAT_AUTO;
        const std::string parser = given.value("parser", std::string());
        if (!parser.empty()) {
            params.parser.load(parser);
        }
        common_chat_msg message = common_chat_parse(text, partial != 0, params);
        common_json calls = common_json::array();
        for (const auto & call : message.tool_calls) {
            common_json item = common_json::object();
            item["name"] = call.name;
            item["arguments"] = call.arguments;
            item["id"] = call.id;
            calls.push_back(item);
        }
        common_json answer = common_json::object();
        answer["content"] = message.content;
        answer["reasoning_content"] = message.reasoning_content;
        answer["tool_calls"] = calls;
        return give(answer.dump());
    } catch (const std::exception & e) {
        return refuse(e.what());
    }
}

}  // extern "C"
